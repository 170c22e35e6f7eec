"""What the ATen ops within a block do: the largest tensor any returns (how the tests see that nothing of ``N x
N`` size is ever held), and the inner sizes of the batched products (how they see that no product runs over all
N tokens)."""

from __future__ import annotations

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves


class LargestTensor(TorchDispatchMode):
    """Records the largest ``numel`` of any tensor an ATen op returns while the mode is active."""

    def __init__(self):
        super().__init__()
        self.numel = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        sizes = [t.numel() for t in tree_leaves(out) if isinstance(t, torch.Tensor)]
        self.numel = max([self.numel, *sizes])
        return out


class BatchedProducts(TorchDispatchMode):
    """Records the inner dimension of every ``torch.bmm`` (what batched matrix products run as) while active."""

    def __init__(self):
        super().__init__()
        self.inner = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is torch.ops.aten.bmm.default:
            self.inner.add(args[0].shape[-1])
        return func(*args, **(kwargs or {}))
