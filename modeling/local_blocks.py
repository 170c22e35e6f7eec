"""Exact softmax inside aligned blocks: the chunked reader as one attention, beside any mechanism as its memory.

With ``S = local_block`` and ``g = global_tokens``, each sequence's real tokens, in rank order, are cut into
consecutive blocks of S (the last one may be shorter), and token i attends exactly, with softmax, to the real
tokens j with::

    floor(rank_i / S) == floor(rank_j / S)     or     rank_j < g          (its own block, and the global keys)

and a global token (``rank_i < g``) attends to every real token. Ranks count real tokens only, so left padding,
right padding and holes give the same outputs at real tokens.

Why aligned blocks: a checkpoint whose positions were extended by Longformer's copy (``position_extension.py``)
gives the token of rank t the position row ``t mod L``. With ``S = L`` every block sees positions ``0 .. L-1``
and the context the checkpoint was trained on: block-diagonal softmax over aligned blocks *is* the checkpoint
reading the input in chunks of L tokens, as one model. Alone (``local`` with ``local_block``) it is that chunked
reader. Beside a mechanism, the mechanism reads the whole input as a memory across the blocks, weighted per head by
the gate ``sigma = sigmoid(mechanism_logit)``, which starts near zero: the converted model starts as the chunked
reader, and training adds what the memory carries (Infini-attention's design, Munkhdalai et al. 2024, Sec. 2.1,
made bidirectional for an encoder). The two are mixed per head, ``(1 - sigma) blocks(x) + sigma mechanism(x)``
(``hybrid_attention.py``), or for a kernelized mechanism with the model's ``shared_normaliser`` True, under one
normaliser with the block's softmax (``shared_normaliser.py``: the memory of a block is then the mechanism's summary
over every key less its own block's).

Cost: the blocks run :func:`torch.nn.functional.scaled_dot_product_attention` as one batch of ``B n`` sequences
of S tokens (``n = ceil(N / S)``), so a GPU takes its flash kernel and a CPU its fused one: O(N S d) time, never an
N x N tensor. When ``N = n S`` the blocks are a view of the input, with strides the flash kernel takes. Without
padding or global tokens no mask is needed (a short last block runs as its own batch); otherwise a boolean key mask
``[B n, 1, 1, S + g]`` (``AlignedBlocks.mask``) keeps each block's real non-global keys, then the real global ones:
it hides the pads and the global keys' second copy.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .attention_registry import register_local_part
from .hybrid_attention import LocalPart
from .masking import RankOrder, exporting_graph


class AlignedBlocks:
    """``[B, h, N, F]`` as ``n = ceil(N / S)`` blocks ``[B n, h, S, F]``; key ``mask [B n, 1, 1, S + g]`` or None."""

    def __init__(self, lengths: torch.Tensor, length: int, size: int, global_tokens: int, device, masked: bool):
        self.size, self.length, self.global_tokens = size, length, global_tokens
        self.count = (length + size - 1) // size  # ints only: the length may be symbolic
        if exporting_graph():  # unread extra block, lest torch.export fix n = 1
            self.count += 1
        self.mask = None
        if masked:
            ranks = torch.arange(self.count * size, device=device)
            real = ranks < lengths[:, None]  # [B, n S]
            keys = (real & (ranks >= global_tokens)).view(-1, self.count, size)  # [B, n, S]
            if global_tokens:
                keys = torch.cat([keys, real[:, None, :global_tokens].expand(-1, self.count, -1)], dim=-1)
            empty = ~keys.any(-1, keepdim=True)  # a keyless block (never read) attends to all
            self.mask = (keys | empty).flatten(0, 1)[:, None, None, :]

    @property
    def padded(self) -> int:
        """``n S``, the zero-padded length."""
        return self.count * self.size

    def pad(self, x: torch.Tensor) -> torch.Tensor:
        """``[B, h, N, F]`` -> ``[B, h, n S, F]``, zero-padded."""
        missing = self.padded - x.shape[2]
        return F.pad(x, (0, 0, 0, missing)) if missing else x

    def split(self, x: torch.Tensor) -> torch.Tensor:
        """``[B, h, N, F]`` -> ``[B n, h, S, F]``."""
        return self.pad(x).unflatten(2, (self.count, self.size)).transpose(1, 2).flatten(0, 1)

    def keys(self, x: torch.Tensor) -> torch.Tensor:
        """``[B, h, N, F]`` -> ``[B n, h, S + g, F]``, the global keys last."""
        blocks = self.split(x)
        if not self.global_tokens:
            return blocks
        global_keys = x[:, None, :, :self.global_tokens].expand(-1, self.count, -1, -1, -1).flatten(0, 1)
        return torch.cat([blocks, global_keys], dim=2)

    def merge(self, y: torch.Tensor) -> torch.Tensor:
        """``[B n, h, S, F]`` -> ``[B, h, N, F]``."""
        blocks = y.unflatten(0, (-1, self.count)).transpose(1, 2)  # [B, h, n, S, F]
        return blocks.flatten(2, 3)[:, :, :self.length]


def block_softmax(query, key, value, blocks: AlignedBlocks, dropout_p: float) -> torch.Tensor:
    """Softmax in each block and over the global keys: ``[B, h, N, d]`` in rank order, in and out."""
    def attend(q, k, v, mask=None):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)

    if blocks.mask is not None:
        return blocks.merge(attend(blocks.split(query), blocks.keys(key), blocks.keys(value), blocks.mask))
    full = (blocks.length // blocks.size) * blocks.size
    whole = AlignedBlocks(None, full, blocks.size, 0, None, masked=False)
    parts = [whole.merge(attend(*(whole.split(x[:, :, :full]) for x in (query, key, value))))] if full else []
    if full < blocks.length:
        parts.append(attend(*(x[:, :, full:] for x in (query, key, value))))
    return torch.cat(parts, dim=2) if len(parts) > 1 else parts[0]


@register_local_part("blocks")
class LocalBlocks(LocalPart):
    """Exact softmax in aligned blocks of ``S = local_block``: i attends to real j if ``rank_i // S == rank_j // S`` or
    ``rank_j < g``; a global token to all."""

    def __init__(self, num_heads: int, local_block: int, global_tokens: int = 0,
                 mechanism_weight: float | None = None):
        super().__init__(num_heads, global_tokens, mechanism_weight)
        self.size = local_block

    def blocks(self, order: RankOrder, length: int, device) -> AlignedBlocks:
        # export: masked shapes follow the length
        masked = order.padding_mask is not None or self.global_tokens > 0 or exporting_graph()
        return AlignedBlocks(order.lengths, length, self.size, self.global_tokens, device, masked)

    def softmax(self, query, key, value, order: RankOrder, dropout: nn.Module) -> torch.Tensor:
        """:func:`block_softmax` with exact global rows."""
        blocks = self.blocks(order, query.shape[2], query.device)
        dropout_p = dropout.p if dropout.training else 0.0
        context = block_softmax(query, key, value, blocks, dropout_p)
        return self.with_global_rows(context, query, key, value, order.lengths, blocks.padded, dropout)

    def exact_ranks(self, query_ranks, key_ranks):
        return query_ranks // self.size == key_ranks // self.size  # ranks are never negative

    def extra_repr(self) -> str:
        return f"local_block={self.size}, global_tokens={self.global_tokens}"
