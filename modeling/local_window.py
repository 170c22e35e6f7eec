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

Used alone by the ``local`` mechanism (``attention_local.py``) and beside every other mechanism with
``local_window`` set, either mixed with its output (``attention_base.py``) or, for the kernelized mechanisms,
under one normaliser shared with the mechanism's terms (``kernel_attention.py``). Beside a mechanism the window
owns the per-head logit of the mechanism's weight, ``sigma(mechanism_logit)`` ``[h]``.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn
from transformers import initialization as init

from .masking import gather_tokens, masked_softmax, real_lengths, real_positions, token_ranks

MIN_BLOCK = 32  # the fewest queries in a block: a smaller window still scores 3 * 32 keys per query


class WindowOutput(NamedTuple):
    """``context [B, h, N, d]`` (token positions), ``global_rows [B or 1, N]`` (True at the global tokens, whose
    rows are exact over every token) and, when asked, the ``[B, h, N, N]`` probabilities."""

    context: torch.Tensor
    global_rows: torch.Tensor
    attentions: torch.Tensor | None = None


class RankOrder:
    """Moves ``[B, h, N, F]`` tensors between token positions and rank order, in which each sequence's real tokens
    come first, in order. Without a padding mask the two orders are the same and nothing moves."""

    def __init__(self, padding_mask: torch.Tensor | None, batch: int, length: int, device):
        self.lengths = real_lengths(padding_mask, batch, length, device)  # [B]
        self.padding_mask = padding_mask
        if padding_mask is not None:
            self.positions = real_positions(padding_mask, batch, length, device)  # [B, N]: the position of rank t
            self.ranks = token_ranks(padding_mask, batch, length, device)  # [B, N]: the rank at position i

    def to_ranks(self, x: torch.Tensor) -> torch.Tensor:
        """``x [B, h, N, F]`` in rank order; the slots past a sequence's real tokens hold copies, never zeros (see
        :meth:`zero_past_end`)."""
        return x if self.padding_mask is None else gather_tokens(x, self.positions)

    def zero_past_end(self, x: torch.Tensor) -> torch.Tensor:
        """Rank-ordered ``x [B, h, N, F]`` with zeros past each sequence's real tokens."""
        if self.padding_mask is None:
            return x
        real = torch.arange(x.shape[2], device=x.device) < self.lengths[:, None]
        return x * real[:, None, :, None].to(x.dtype)

    def to_positions(self, x: torch.Tensor) -> torch.Tensor:
        return x if self.padding_mask is None else gather_tokens(x, self.ranks)

    def ranks_at_positions(self, length: int, device) -> torch.Tensor:
        """``[B, N]`` (``[1, N]`` without padding): each position's rank among its sequence's real tokens."""
        return torch.arange(length, device=device)[None] if self.padding_mask is None else self.ranks


class WindowBlocks:
    """Rank-ordered tokens cut into ``n`` blocks of ``b`` queries, and the keys each block scores: its own block,
    its two neighbours and the g global keys, ``3b + g`` in all. ``allowed [B, 1, n, b, 3b + g]`` says which of
    them a query attends to exactly: within its window and real, or global and real (a global key is never also
    counted in the window part)."""

    def __init__(self, lengths: torch.Tensor, length: int, radius: int, global_tokens: int, device):
        self.block = max(radius, MIN_BLOCK, global_tokens)
        self.length, self.global_tokens = length, global_tokens
        self.num_blocks = (length + self.block - 1) // self.block
        ranks = torch.arange(self.num_blocks * self.block, device=device)
        real = ranks < lengths[:, None]  # [B, P]
        near_keys = self.neighbours(self.queries((real & (ranks >= global_tokens))[:, None, :, None]))
        offsets = torch.arange(self.block, device=device)[:, None] + self.block - torch.arange(3 * self.block,
                                                                                              device=device)
        allowed = (offsets.abs() <= radius) & near_keys.transpose(-1, -2)  # [B, 1, n, b, 3b]
        if global_tokens:
            global_keys = real[:, None, None, None, :global_tokens]  # [B, 1, 1, 1, g]
            allowed = torch.cat([allowed, global_keys.expand(*allowed.shape[:-1], global_tokens)], dim=-1)
        self.allowed = allowed
        self.real = real  # [B, P]

    @property
    def padded(self) -> int:
        """``n b``: the tokens of the blocks, the last one filled with zeros."""
        return self.num_blocks * self.block

    def pad(self, x: torch.Tensor) -> torch.Tensor:
        """``[B, h, N or less, F]`` -> ``[B, h, n b, F]``, zeros after the last token."""
        return F.pad(x, (0, 0, 0, self.padded - x.shape[2]))

    def queries(self, x: torch.Tensor) -> torch.Tensor:
        """``[B, h, N or less, F]`` -> ``[B, h, n, b, F]``."""
        return self.pad(x).unflatten(2, (self.num_blocks, self.block))

    @staticmethod
    def neighbours(blocks: torch.Tensor) -> torch.Tensor:
        """``[B, h, n, b, F]`` -> ``[B, h, n, 3b, F]``: each block with the one before and the one after (zeros at
        the ends)."""
        padded = F.pad(blocks, (0, 0, 0, 0, 1, 1))  # [B, h, n + 2, b, F]
        return torch.cat([padded[:, :, :-2], padded[:, :, 1:-1], padded[:, :, 2:]], dim=3)

    def keys(self, x: torch.Tensor) -> torch.Tensor:
        """``[B, h, N, F]`` -> the keys (or values) each block scores, ``[B, h, n, 3b + g, F]``."""
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
        """``queries [B, h, N, F] . keys [B, h, N, F]`` of each query with the keys its block scores, ``[B, h, n, b,
        3b + g]``: one batched product over the ``B h n`` blocks (a 5-D ``matmul`` would loop in its backward)."""
        blocked = self.queries(queries)
        products = torch.bmm(blocked.flatten(0, 2), self.keys(keys).flatten(0, 2).transpose(1, 2))
        return products.view(*blocked.shape[:-1], products.shape[-1])

    def weighted(self, weights: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        """``weights [B, h, n, b, 3b + g]`` applied to the values each block scores, ``values [B, h, N, F]`` ->
        ``[B, h, N, F]``."""
        blocked = self.keys(values)
        mixed = torch.bmm(weights.to(values.dtype).flatten(0, 2), blocked.flatten(0, 2))
        return self.tokens(mixed.view(*weights.shape[:-1], values.shape[-1]))


def at_least_float32(x: torch.Tensor) -> torch.Tensor:
    """``x`` in float32, or in its own dtype when that is wider (float64 stays)."""
    return x.to(torch.promote_types(x.dtype, torch.float32))


def exact_weights(scores: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """``exp(s_ij - max_j s_ij)`` at the allowed entries, 0 elsewhere (exactly: the others are filled with the
    dtype's lowest value), in at least float32: ``scores [..., K]``. A row with no allowed entry (a pad's) is
    meaningless but finite. The max cancels in the window's own softmax, but not beside a kernelized mechanism's
    terms (one normaliser), where it sets the two parts' relative scale: so its gradient is kept."""
    scores = at_least_float32(scores)
    scores = scores.masked_fill(~allowed, torch.finfo(scores.dtype).min)
    return torch.exp(scores - scores.amax(-1, keepdim=True))


class LocalPart(nn.Module):
    """What the exact local parts share, the sliding window here and the aligned blocks (``local_blocks.py``): the
    global tokens' exact rows and, beside a mechanism, the per-head gate on the mechanism's part. ``mechanism_weight``:
    the gate's initial value ``sigma(mechanism_logit)``, or None without a mechanism (``local``).

    A part computes ``attend`` (itself alone), ``attend_beside_kernel`` (under one normaliser with a kernelized
    mechanism's terms, ``kernel_attention.py``), ``dense_allowed`` and ``dense_exact_terms`` (the same as
    ``[B, h, N, N]`` matrices, for ``output_attentions`` only)."""

    def __init__(self, num_heads: int, global_tokens: int = 0, mechanism_weight: float | None = None):
        super().__init__()
        self.global_tokens = global_tokens
        self.initial_mechanism_weight = mechanism_weight
        if mechanism_weight is not None:
            self.mechanism_logit = nn.Parameter(torch.empty(num_heads))
            self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.initial_mechanism_weight is not None:
            weight = self.initial_mechanism_weight
            init.constant_(self.mechanism_logit, math.log(weight / (1 - weight)))

    def mechanism_weight(self) -> torch.Tensor:
        """``sigma(mechanism_logit)`` ``[h]``: each head's weight on the mechanism's part (the gate)."""
        return torch.sigmoid(self.mechanism_logit)

    def global_rows(self, order: RankOrder, length: int, device) -> torch.Tensor:
        """``[B, N]`` (``[1, N]`` without padding) bool: the global tokens (rank below g), at their positions."""
        return order.ranks_at_positions(length, device) < self.global_tokens

    def with_global_rows(self, context, query, key, value, lengths: torch.Tensor, padded: int, dropout: nn.Module):
        """Rank-ordered ``context [B, h, N, d]`` with the global tokens' rows replaced by their exact rows: softmax
        over every real key (``lengths [B]`` real tokens), from rank-ordered ``query``, ``key``, ``value``, the keys
        zero-padded to the part's ``padded`` length (the same shapes for a sequence alone and in a padded batch)."""
        if not self.global_tokens:
            return context
        queries, keys, values = (F.pad(x, (0, 0, 0, padded - x.shape[2])) for x in (query, key, value))
        real = torch.arange(padded, device=key.device) < lengths[:, None]  # [B, padded]
        scores = queries[:, :, :self.global_tokens] @ keys.transpose(-1, -2) * query.shape[-1] ** -0.5
        probabilities = masked_softmax(at_least_float32(scores), real[:, None, None, :], dim=-1)
        rows = (dropout(probabilities).to(value.dtype) @ values)[:, :, :query.shape[2]]  # [B, h, g or fewer, d]
        return torch.cat([rows, context[:, :, rows.shape[2]:]], dim=2)

    def dense_allowed(self, order: RankOrder, length: int, device) -> torch.Tensor:
        """``[B or 1, 1, N, N]`` bool, in token positions: the pairs (query i, key j) of the exact part, real keys
        only (for ``output_attentions`` only: it is N x N)."""
        ranks = order.ranks_at_positions(length, device)
        exact = self.exact_ranks(ranks[:, :, None], ranks[:, None, :])
        exact = exact | (ranks[:, None, :] < self.global_tokens) | (ranks[:, :, None] < self.global_tokens)
        if order.padding_mask is not None:
            exact = exact & order.padding_mask[:, None, :]
        return exact[:, None]

    def exact_ranks(self, query_ranks: torch.Tensor, key_ranks: torch.Tensor) -> torch.Tensor:
        """Whether a query of rank ``query_ranks`` attends exactly to a key of rank ``key_ranks`` (broadcast), global
        tokens aside."""
        raise NotImplementedError

    def dense_probabilities(self, query, key, order: RankOrder) -> torch.Tensor:
        """The part's ``[B, h, N, N]`` probabilities, from ``query``, ``key`` ``[B, h, N, d]`` in token positions."""
        scores = query @ key.transpose(-1, -2) * query.shape[-1] ** -0.5
        allowed = self.dense_allowed(order, query.shape[2], query.device)
        return masked_softmax(at_least_float32(scores), allowed, dim=-1).to(query.dtype)

    def dense_shared_attention(self, query, key, query_features, key_features, order: RankOrder, weight,
                               outside: bool) -> torch.Tensor:
        """The ``[B, h, N, N]`` matrix that :meth:`attend_beside_kernel` applies (for ``output_attentions`` only),
        from the projections and features ``[B, h, N, *]`` in token positions (key features zero at pads)."""
        allowed = self.dense_allowed(order, query.shape[2], query.device)
        exact = self.dense_exact_terms(query @ key.transpose(-1, -2) * query.shape[-1] ** -0.5, allowed)
        global_rows = self.global_rows(order, query.shape[2], query.device)[:, None, :, None]  # exact over every key
        mechanism = ~allowed if outside else ~global_rows
        terms = (1 - weight) * exact + weight * (query_features @ key_features.transpose(-1, -2)) * mechanism
        return (terms / terms.sum(-1, keepdim=True).clamp_min(torch.finfo(terms.dtype).tiny)).to(query.dtype)

    def dense_exact_terms(self, scores: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
        """What each exact key adds to the shared normaliser, from ``scores [..., N]`` and ``allowed``."""
        raise NotImplementedError


class LocalWindow(LocalPart):
    """The exact window of one attention layer (see the module docstring); ``mechanism_weight``: with a mechanism
    beside it, the initial ``sigma(mechanism_logit)`` of every head, else None."""

    def __init__(self, num_heads: int, local_window: int, global_tokens: int = 0,
                 mechanism_weight: float | None = None):
        super().__init__(num_heads, global_tokens, mechanism_weight)
        self.radius = local_window // 2

    def blocks(self, order: RankOrder, length: int, device) -> WindowBlocks:
        return WindowBlocks(order.lengths, length, self.radius, self.global_tokens, device)

    def attend(self, query, key, value, padding_mask, dropout: nn.Module,
               output_attentions: bool = False) -> WindowOutput:
        """The window alone: ``query``, ``key``, ``value`` ``[B, h, N, d]`` and ``padding_mask [B, N]`` (or None)
        -> :class:`WindowOutput`; ``dropout`` acts on the probabilities."""
        batch, _, length, _ = query.shape
        order = RankOrder(padding_mask, batch, length, query.device)
        attentions = self.dense_probabilities(query, key, order) if output_attentions else None
        query, key, value = (order.to_ranks(x) for x in (query, key, value))
        blocks = self.blocks(order, length, query.device)
        scores = at_least_float32(blocks.products(query * query.shape[-1] ** -0.5, key))  # [B, h, n, b, 3b + g]
        probabilities = masked_softmax(scores, blocks.allowed, dim=-1)  # a row with no key (a pad's) is ignored
        context = blocks.weighted(dropout(probabilities), value)
        context = self.with_global_rows(context, query, key, value, order.lengths, blocks.padded, dropout)
        return WindowOutput(order.to_positions(context), self.global_rows(order, length, query.device), attentions)

    def attend_beside_kernel(self, query, key, value, query_features, key_features, padding_mask, weight,
                             mechanism: nn.Module) -> torch.Tensor:
        """The window and a kernelized mechanism under one normaliser (LoLCATs), ``weight = sigma`` ``[h, 1, 1]``::

            out_i = ((1 - sigma) sum_{j exact} e_ij v_j + sigma sum_{j outside} phi(q_i).varphi(k_j) v_j)
                    / ((1 - sigma) sum_{j exact} e_ij   + sigma sum_{j outside} phi(q_i).varphi(k_j))

        with ``e_ij = exp(s_ij - max_j s_ij)`` over the exact keys (the window and the global tokens). The terms
        outside are all of the mechanism's minus those at the exact keys, which the window's blocks give: O(N (3b +
        g) F); with ``mechanism_outside_window`` False the mechanism's terms cover every key. Inputs ``[B, h, N,
        *]`` in token positions (key features zero at pads, in the dtype the sums run in: at least float32);
        ``mechanism``: the kernelized mechanism, whose ``over_every_key`` gives its terms over every key,
        ``key_dropout`` the key columns its dropout keeps and ``dropout`` the window's. Returns the context ``[B, h,
        N, d]`` in token positions, in the values' dtype; the global tokens' rows are exact."""
        batch, _, length, _ = query.shape
        order = RankOrder(padding_mask, batch, length, query.device)
        blocks = self.blocks(order, length, query.device)
        query, key, value, query_features = (order.to_ranks(x) for x in (query, key, value, query_features))
        key_features = order.zero_past_end(order.to_ranks(key_features))
        keep = mechanism.key_dropout(key_features)
        exact = exact_weights(blocks.products(query * query.shape[-1] ** -0.5, key), blocks.allowed)
        block_weight = weight[..., None]  # [h, 1, 1, 1], for the blocks [B, h, n, b, 3b + g]
        terms = (1 - block_weight) * exact  # what each exact key adds to a row: its softmax term, less
        if mechanism.mechanism_outside_window:  # the mechanism's term for it (counted in `everywhere`)
            terms = terms - block_weight * blocks.products(query_features, key_features)
        terms = terms.masked_fill(~blocks.allowed, 0)  # [B, h, n, b, 3b + g]
        dropped, values = key_features if keep is None else key_features * keep, at_least_float32(value)
        everywhere, everywhere_sums = mechanism.over_every_key(query_features, dropped, key_features, values)
        kept = terms if keep is None else terms * blocks.keys(keep).transpose(-1, -2)
        numerator = blocks.weighted(kept, values) + weight * everywhere
        denominator = blocks.tokens(terms.sum(-1, keepdim=True)) + weight * everywhere_sums
        context = numerator / denominator.clamp_min(torch.finfo(denominator.dtype).tiny)
        context = self.with_global_rows(context.to(value.dtype), query, key, value, order.lengths, blocks.padded,
                                         mechanism.dropout)
        return order.to_positions(context)

    def exact_ranks(self, query_ranks, key_ranks):
        return (query_ranks - key_ranks).abs() <= self.radius

    def dense_exact_terms(self, scores, allowed):
        return exact_weights(scores, allowed)

    def extra_repr(self) -> str:
        return f"radius={self.radius}, global_tokens={self.global_tokens}"
