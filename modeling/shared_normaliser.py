"""A kernelized mechanism beside an exact local part, under one normaliser (LoLCATs: Zhang et al. 2024, Sec. 3.1).

The composition of ``hybrid_attention.py`` mixes the two parts' outputs per head; this one, for the kernelized
mechanisms (``kernel_attention.py``) where the model's ``shared_normaliser`` is in force (by default beside a window),
puts the part's exact softmax terms and the mechanism's terms under one normaliser, weighted per head by ``sigma =
sigmoid(mechanism_logit)``. Beside a window, with ``e_ij = exp(s_ij - max_j s_ij)`` over the exact keys::

    out_i = ((1 - sigma) sum_{j exact} e_ij v_j + sigma sum_{j outside} phi(q_i).varphi(k_j) v_j)
            / ((1 - sigma) sum_{j exact} e_ij   + sigma sum_{j outside} phi(q_i).varphi(k_j))

beside aligned blocks, the block's softmax ``p_ij`` enters with its own normaliser (its weights sum to 1)::

    out_i = ((1 - sigma) sum_{j exact} p_ij v_j + sigma sum_{j outside} phi(q_i).varphi(k_j) v_j)
            / ((1 - sigma)                    + sigma sum_{j outside} phi(q_i).varphi(k_j))

"Outside" is every key but the exact ones (the global keys included), or every key when the mechanism's
``mechanism_outside_window`` is False. The mechanism gives its terms through one small interface:
``kernel_features``, ``key_dropout``, ``summary_chunk``, ``mechanism_outside_window`` and ``dropout``. Beside a
window the terms outside are all of the mechanism's minus those at the exact keys, which the window's blocks give;
beside blocks, the memory of a block is the mechanism's summary over every key less its own block's: O(N F d) for
all blocks, with no product inside a block.
"""

from __future__ import annotations

import math
from typing import Callable, ClassVar

import torch

from .attention_base import AttentionOutput
from .attention_registry import register_composition
from .hybrid_attention import HybridAttention
from .kernel_attention import terms_over_every_key
from .local_blocks import AlignedBlocks, block_softmax
from .masking import RankOrder, at_least_float32


class SharedNormaliserAttention(HybridAttention):
    """A kernelized mechanism and its local part under one normaliser (LoLCATs), ``sigma = sigmoid(mechanism_logit)``::

        out_i = ((1 - sigma) sum_{j exact} e_ij v_j + sigma sum_{j outside} phi(q_i).varphi(k_j) v_j)
                / ((1 - sigma) sum_{j exact} e_ij   + sigma sum_{j outside} phi(q_i).varphi(k_j))

    with ``e_ij = exp(s_ij - max_j s_ij)`` beside a window, the block's softmax beside blocks. One part alone, or no
    gate, runs as the mixed composition; a subclass per kind of part gives ``beside_kernel`` and ``exact_terms``."""

    shares_normaliser = True
    beside_kernel: ClassVar[Callable[..., torch.Tensor]]
    exact_terms: ClassVar[Callable[[torch.Tensor, torch.Tensor], torch.Tensor]]

    def exact_forward(self, hidden_states, padding_mask=None, state=None, output_attentions=False) -> AttentionOutput:
        if self.parts != "mechanism" and self.window.initial_mechanism_weight is not None:
            return self.attend_under_one_normaliser(hidden_states, padding_mask, output_attentions)
        return super().exact_forward(hidden_states, padding_mask, state, output_attentions)

    def attend_under_one_normaliser(self, hidden_states, padding_mask=None,
                                    output_attentions=False) -> AttentionOutput:
        """The part and the mechanism under one normaliser, the global tokens' rows exact."""
        query, key, value = self.project(hidden_states)
        query_features, key_features = (at_least_float32(x) for x in self.kernel_features(query, key, padding_mask))
        weight = self.window.mechanism_weight()[:, None, None]  # [h, 1, 1]
        with torch.autocast(value.device.type, enabled=False):  # sums over N tokens overflow half precision
            context = self.beside_kernel(self.window, query, key, value, query_features, key_features, padding_mask,
                                         weight, self)
        attentions = None
        if output_attentions:
            order = RankOrder(padding_mask, query.shape[0], query.shape[2], query.device)
            attentions = dense_shared_attention(self.window, self.exact_terms, query, key, query_features,
                                                key_features, order, weight, self.mechanism_outside_window)
        return AttentionOutput(self.merge_heads(context), attentions=attentions)


def window_beside_kernel(window, query, key, value, query_features, key_features, padding_mask, weight,
                         mechanism) -> torch.Tensor:
    """A ``LocalWindow`` and a kernelized ``mechanism`` under one normaliser, ``weight = sigma [h, 1, 1]``; the terms
    outside are the mechanism's over every key less, if ``mechanism_outside_window``, those at the exact keys.
    Inputs ``[B, h, N, *]`` in token positions, key features zero at pads; returns ``[B, h, N, d]``, the global
    tokens' rows exact."""
    batch, _, length, _ = query.shape
    order = RankOrder(padding_mask, batch, length, query.device)
    blocks = window.blocks(order, length, query.device)
    query, key, value, query_features = (order.to_ranks(x) for x in (query, key, value, query_features))
    key_features = real_keys_in_ranks(order, key_features)
    keep = mechanism.key_dropout(key_features)
    exact = exact_weights(blocks.products(query * query.shape[-1] ** -0.5, key), blocks.allowed)
    block_weight = weight[..., None]  # [h, 1, 1, 1]
    terms = (1 - block_weight) * exact  # an exact key's term: its softmax term,
    if mechanism.mechanism_outside_window:  # less the mechanism's (counted in `everywhere`)
        terms = terms - block_weight * blocks.products(query_features, key_features)
    terms = terms.masked_fill(~blocks.allowed, 0)  # [B, h, n, b, 3b + g]
    dropped, values = key_features if keep is None else key_features * keep, at_least_float32(value)
    everywhere, everywhere_sums = terms_over_every_key(query_features, dropped, key_features, values,
                                                          mechanism.summary_chunk)
    kept = terms if keep is None else terms * blocks.keys(keep).transpose(-1, -2)
    numerator = blocks.weighted(kept, values) + weight * everywhere
    denominator = blocks.tokens(terms.sum(-1, keepdim=True)) + weight * everywhere_sums
    context = numerator / denominator.clamp_min(torch.finfo(denominator.dtype).tiny)
    context = window.with_global_rows(context.to(value.dtype), query, key, value, order.lengths, blocks.padded,
                                      mechanism.dropout)
    return order.to_positions(context)


def real_keys_in_ranks(order: RankOrder, x: torch.Tensor) -> torch.Tensor:
    """``x [B, h, N, F]`` in rank order, zero past each sequence's real tokens (where ``to_ranks`` leaves copies)."""
    x = order.to_ranks(x)
    if order.padding_mask is None:
        return x
    real = torch.arange(x.shape[2], device=x.device) < order.lengths[:, None]
    return x * real[:, None, :, None].to(x.dtype)


def exact_weights(scores: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """``exp(s_ij - max_j s_ij)`` of ``scores [..., K]`` where ``allowed``, exactly 0 elsewhere, in at least float32;
    a pad's row is finite. The max keeps its gradient: beside the mechanism it sets the two parts' relative scale."""
    scores = at_least_float32(scores)
    scores = scores.masked_fill(~allowed, torch.finfo(scores.dtype).min)
    return torch.exp(scores - scores.amax(-1, keepdim=True))


def summaries(dropped: torch.Tensor, kept: torch.Tensor, value: torch.Tensor):
    """Each of G key groups' summaries ``sum_s m_s varphi(k_s)^T v_s`` ``[G, F, d]`` and ``sum_s varphi(k_s)``
    ``[G, F]``, from ``dropped = m varphi(K)`` (key dropout), ``kept`` ``[G, S, F]`` and ``value [G, S, d]``."""
    return torch.bmm(dropped.transpose(1, 2), value), kept.sum(1)


def block_matrices(blocks: AlignedBlocks, x: torch.Tensor) -> torch.Tensor:
    """``[B, h, N, F]`` -> ``[B h n, S, F]``, a matrix per block and head, for ``torch.bmm``."""
    return blocks.pad(x).reshape(-1, blocks.size, x.shape[-1])


def from_block_matrices(blocks: AlignedBlocks, y: torch.Tensor, heads: int) -> torch.Tensor:
    """``[B h n, S, F]`` -> ``[B, h, N, F]``, the inverse of :func:`block_matrices`."""
    return y.view(-1, heads, blocks.padded, y.shape[-1])[:, :, :blocks.length]


def memory_terms(query_features, dropped, kept, value, blocks: AlignedBlocks, outside: bool):
    """The mechanism's terms for each query over the non-global keys outside its block (every key if not
    ``outside``): rank-ordered ``[B, h, N, *]`` in (``dropped``, ``kept`` zero past the real tokens), numerators
    ``[B, h, N, d]`` and normalisers ``[B, h, N, 1]`` out, in at least float32. A block's memory is all blocks'
    summaries less its own: one ``torch.bmm`` over the blocks, as one over N keys would use few GPU multiprocessors."""
    batch, heads = value.shape[:2]
    query_features, dropped, kept, value = (at_least_float32(x) for x in (query_features, dropped, kept, value))
    keys = block_matrices(blocks, dropped)  # [B h n, S, F]
    kept_keys, values = keys if kept is dropped else block_matrices(blocks, kept), block_matrices(blocks, value)
    products, sums = (x.unflatten(0, (batch, heads, blocks.count)) for x in summaries(keys, kept_keys, values))
    memory, memory_sums = products.sum(2, keepdim=True), sums.sum(2, keepdim=True)  # every key's, [B, h, 1, F, *]
    if outside:
        memory, memory_sums = memory - products, memory_sums - sums
        if blocks.global_tokens:  # global keys are exact: remove them from blocks > 0 (block 0's memory lacks them)
            # block 0 masked to its g keys, not sliced: an inner size of 1 (g = 1) has torch.export fix the batch
            is_global = (torch.arange(blocks.size, device=value.device) < blocks.global_tokens)[:, None]
            first = [x.unflatten(0, (-1, blocks.count))[:, 0] for x in (keys, kept_keys, values)]  # [B h, S, *]
            global_products, global_sums = (x.unflatten(0, (batch, heads))[:, :, None] for x in summaries(
                first[0] * is_global, first[1] * is_global, first[2]))
            later = (torch.arange(blocks.count, device=value.device) > 0).to(value.dtype)[:, None]  # [n, 1]
            memory = memory - later[..., None] * global_products
            memory_sums = memory_sums - later * global_sums
    memory, memory_sums = (x.expand(-1, -1, blocks.count, *x.shape[3:]).flatten(0, 2)
                           for x in (memory, memory_sums))  # [B h n, F, *]
    queries = block_matrices(blocks, query_features)  # [B h n, S, F]
    numerator = torch.bmm(queries, memory)
    normaliser = torch.bmm(queries, memory_sums.unsqueeze(-1))
    return from_block_matrices(blocks, numerator, heads), from_block_matrices(blocks, normaliser, heads)


def blocks_beside_kernel(blocks_part, query, key, value, query_features, key_features, padding_mask, weight,
                         mechanism) -> torch.Tensor:
    """``LocalBlocks`` and a kernelized ``mechanism`` under one normaliser, the terms outside from
    :func:`memory_terms`; otherwise as :func:`window_beside_kernel`."""
    batch, _, length, _ = query.shape
    order = RankOrder(padding_mask, batch, length, query.device)
    query, key, value, query_features = (order.to_ranks(x) for x in (query, key, value, query_features))
    key_features = real_keys_in_ranks(order, key_features)
    keep, dropout = mechanism.key_dropout(key_features), mechanism.dropout
    dropped = key_features if keep is None else key_features * keep
    blocks = blocks_part.blocks(order, length, query.device)
    numerator, normaliser = memory_terms(query_features, dropped, key_features, value, blocks,
                                         mechanism.mechanism_outside_window)
    exact = block_softmax(query, key, value, blocks, dropout.p if dropout.training else 0.0)
    weight = weight.to(numerator.dtype)
    # ((1 - sigma) exact + sigma numerator) / ((1 - sigma) + sigma normaliser), fused
    context = torch.lerp(exact.to(numerator.dtype), numerator, weight) / torch.addcmul(1 - weight, weight,
                                                                                       normaliser)
    context = blocks_part.with_global_rows(context.to(value.dtype), query, key, value, order.lengths, blocks.padded,
                                           dropout)
    return order.to_positions(context)


def block_probabilities(scores: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """Softmax over the exact keys: a block's row adds 1 to the shared normaliser."""
    return torch.softmax(at_least_float32(scores).masked_fill(~allowed, -math.inf), dim=-1).nan_to_num(0.0)


def dense_shared_attention(part, exact_terms, query, key, query_features, key_features, order: RankOrder, weight,
                           outside: bool) -> torch.Tensor:
    """The ``[B, h, N, N]`` matrix of ``part`` and mechanism under one normaliser, for ``output_attentions``;
    inputs ``[B, h, N, *]`` in token positions, ``exact_terms(scores, allowed)`` the exact keys' terms."""
    allowed = part.dense_allowed(order, query.shape[2], query.device)
    exact = exact_terms(query @ key.transpose(-1, -2) * query.shape[-1] ** -0.5, allowed)
    global_rows = part.global_rows(order, query.shape[2], query.device)[:, None, :, None]  # exact over every key
    mechanism = ~allowed if outside else ~global_rows
    terms = (1 - weight) * exact + weight * (query_features @ key_features.transpose(-1, -2)) * mechanism
    return (terms / terms.sum(-1, keepdim=True).clamp_min(torch.finfo(terms.dtype).tiny)).to(query.dtype)


@register_composition("shared", "window")
class SharedNormaliserBesideWindow(SharedNormaliserAttention):
    """Beside a sliding window: :func:`window_beside_kernel`."""

    beside_kernel = staticmethod(window_beside_kernel)
    exact_terms = staticmethod(exact_weights)


@register_composition("shared", "blocks")
class SharedNormaliserBesideBlocks(SharedNormaliserAttention):
    """Beside aligned blocks: :func:`blocks_beside_kernel`."""

    beside_kernel = staticmethod(blocks_beside_kernel)
    exact_terms = staticmethod(block_probabilities)
