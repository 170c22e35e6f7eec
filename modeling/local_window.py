"""The exact local window: softmax attention over each token's neighbours and the global tokens, at O(N w) cost.

With ``w = local_window``, ``r = w // 2`` (ModernBERT's convention: r tokens on each side) and ``g =
global_tokens``, token i attends exactly, with softmax, to the real tokens j with::

    |rank_i - rank_j| <= r     or     rank_j < g          (the window, and the global keys: [CLS] for g = 1)

and a global token (``rank_i < g``) attends to every real token (Longformer's global attention). Ranks count real
tokens only, so left padding, right padding and holes give the same outputs at real tokens.

Computed in rank order (each sequence's real tokens first), in blocks of ``b = max(r, 32, g)`` queries: a block's
queries score its own block's and its two neighbours' keys, ``[b, 3b]``, and the g global keys, so a query scores
``3b + g`` keys, of which ``min(2r + 1, ...)`` lie in its window; the global tokens' own rows score all N keys.
Time and memory O(N (3b + g) d): never an N x N tensor, and not a masked full attention.

Registered as the local part ``"window"`` (a model's ``local_window``): alone it is the ``local`` attention, beside a
mechanism it is composed with it (``hybrid_attention.py``: mixed with its output, or for the kernelized mechanisms
under one normaliser shared with the mechanism's terms, ``shared_normaliser.py``); there it owns the per-head logit
of the mechanism's weight, ``sigma(mechanism_logit)`` ``[h]``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .attention_registry import register_local_part
from .hybrid_attention import LocalPart
from .masking import RankOrder, at_least_float32, masked_softmax

MIN_BLOCK = 32  # fewest queries a block: a smaller window still scores 3 * 32 keys


class WindowBlocks:
    """Rank-ordered tokens in ``n`` blocks of ``b`` queries; a block scores ``3b + g`` keys: its own, its two
    neighbours' and the global ones. ``allowed [B, 1, n, b, 3b + g]``: the real keys in a query's window or global
    (each counted once)."""

    def __init__(self, lengths: torch.Tensor, length: int, radius: int, global_tokens: int, device):
        self.block = max(radius, MIN_BLOCK, global_tokens)
        self.length, self.global_tokens = length, global_tokens
        self.num_blocks = (length + self.block - 1) // self.block
        ranks = torch.arange(self.num_blocks * self.block, device=device)
        real = ranks < lengths[:, None]  # [B, n b]
        near_keys = self.neighbours(self.queries((real & (ranks >= global_tokens))[:, None, :, None]))
        offsets = torch.arange(self.block, device=device)[:, None] + self.block - torch.arange(3 * self.block,
                                                                                              device=device)
        allowed = (offsets.abs() <= radius) & near_keys.transpose(-1, -2)  # [B, 1, n, b, 3b]
        if global_tokens:
            global_keys = real[:, None, None, None, :global_tokens]  # [B, 1, 1, 1, g]
            allowed = torch.cat([allowed, global_keys.expand(*allowed.shape[:-1], global_tokens)], dim=-1)
        self.allowed = allowed

    @property
    def padded(self) -> int:
        """``n b``: the blocks' tokens, zero-padded."""
        return self.num_blocks * self.block

    def pad(self, x: torch.Tensor) -> torch.Tensor:
        """``[B, h, N or less, F]`` -> ``[B, h, n b, F]``, zero-padded."""
        return F.pad(x, (0, 0, 0, self.padded - x.shape[2]))

    def queries(self, x: torch.Tensor) -> torch.Tensor:
        """``[B, h, N or less, F]`` -> ``[B, h, n, b, F]``."""
        return self.pad(x).unflatten(2, (self.num_blocks, self.block))

    @staticmethod
    def neighbours(blocks: torch.Tensor) -> torch.Tensor:
        """``[B, h, n, b, F]`` -> ``[B, h, n, 3b, F]``: each block with its two neighbours (zeros at the ends)."""
        padded = F.pad(blocks, (0, 0, 0, 0, 1, 1))  # [B, h, n + 2, b, F]
        return torch.cat([padded[:, :, :-2], padded[:, :, 1:-1], padded[:, :, 2:]], dim=3)

    def keys(self, x: torch.Tensor) -> torch.Tensor:
        """``[B, h, N, F]`` -> ``[B, h, n, 3b + g, F]``: the keys (or values) each block scores."""
        padded = self.pad(x)
        near = self.neighbours(padded.unflatten(2, (self.num_blocks, self.block)))
        if not self.global_tokens:
            return near
        global_keys = padded[:, :, None, :self.global_tokens].expand(-1, -1, self.num_blocks, -1, -1)
        return torch.cat([near, global_keys], dim=3)

    def tokens(self, y: torch.Tensor) -> torch.Tensor:
        """``[B, h, n, b, F]`` -> ``[B, h, N, F]``."""
        return y.flatten(2, 3)[:, :, :self.length]

    def products(self, queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """Each query's products with its block's keys, ``[B, h, N, F]`` twice -> ``[B, h, n, b, 3b + g]``, in one
        ``torch.bmm`` (a 5-D ``matmul`` loops in backward)."""
        blocked = self.queries(queries)
        products = torch.bmm(blocked.flatten(0, 2), self.keys(keys).flatten(0, 2).transpose(1, 2))
        return products.view(*blocked.shape[:-1], products.shape[-1])

    def weighted(self, weights: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        """``weights [B, h, n, b, 3b + g]`` applied to ``values [B, h, N, F]`` -> ``[B, h, N, F]``."""
        blocked = self.keys(values)
        mixed = torch.bmm(weights.to(values.dtype).flatten(0, 2), blocked.flatten(0, 2))
        return self.tokens(mixed.view(*weights.shape[:-1], values.shape[-1]))


@register_local_part("window")
class LocalWindow(LocalPart):
    """Exact sliding-window softmax: token i attends to real j with ``|rank_i - rank_j| <= local_window // 2`` or
    ``rank_j < g``, a global token to all."""

    def __init__(self, num_heads: int, local_window: int, global_tokens: int = 0,
                 mechanism_weight: float | None = None):
        super().__init__(num_heads, global_tokens, mechanism_weight)
        self.radius = local_window // 2

    def blocks(self, order: RankOrder, length: int, device) -> WindowBlocks:
        return WindowBlocks(order.lengths, length, self.radius, self.global_tokens, device)

    def softmax(self, query, key, value, order: RankOrder, dropout: nn.Module) -> torch.Tensor:
        """The window's softmax with exact global rows, rank-ordered ``[B, h, N, d]`` in and out."""
        blocks = self.blocks(order, query.shape[2], query.device)
        scores = at_least_float32(blocks.products(query * query.shape[-1] ** -0.5, key))  # [B, h, n, b, 3b + g]
        probabilities = masked_softmax(scores, blocks.allowed, dim=-1)  # a pad's row has no key: ignored
        context = blocks.weighted(dropout(probabilities), value)
        return self.with_global_rows(context, query, key, value, order.lengths, blocks.padded, dropout)

    def exact_ranks(self, query_ranks, key_ranks):
        return (query_ranks - key_ranks).abs() <= self.radius

    def extra_repr(self) -> str:
        return f"radius={self.radius}, global_tokens={self.global_tokens}"
