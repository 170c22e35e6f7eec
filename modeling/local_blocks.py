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
made bidirectional for an encoder):

* mechanisms without feature maps are mixed per head, ``(1 - sigma) blocks(x) + sigma mechanism(x)``
  (``attention_base.py``);
* kernelized mechanisms (``kernel_attention.py``) share one normaliser with the block's softmax, whose terms enter
  with the block's own normaliser (a block row's softmax weights sum to 1)::

      out_i = ((1 - sigma) sum_{j exact} p_ij v_j + sigma sum_{j outside} phi(q_i).varphi(k_j) v_j)
              / ((1 - sigma)                    + sigma sum_{j outside} phi(q_i).varphi(k_j))

  with ``p_ij`` the softmax over the query's exact keys and "outside" the keys of the other blocks, the global
  ones excepted (``mechanism_outside_window``; every key when it is False). Because the blocks are aligned, the
  memory of the other blocks is the mechanism's summary over every key less its own block's: O(N F d) for all
  blocks, with no product inside a block.

Cost: the blocks run :func:`torch.nn.functional.scaled_dot_product_attention` as one batch of ``B n`` sequences
of S tokens (``n = ceil(N / S)``), so a GPU takes its flash kernel and a CPU its fused one: O(N S d) time, never an
N x N tensor. Without padding or global tokens no mask is needed (a short last block runs as its own batch);
otherwise a boolean key mask ``[B n, 1, 1, S + g]`` hides the pads and the global keys' second copy.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .local_window import LocalPart, RankOrder, WindowOutput, at_least_float32


class AlignedBlocks:
    """Rank-ordered ``[B, h, N, F]`` tensors as ``n = ceil(N / S)`` aligned blocks of S tokens, batched as ``[B n,
    h, S, F]`` (zeros after the last token), and which keys each block's queries attend to: ``mask [B n, 1, 1, S +
    g]`` (its real keys that are not global, then the g global keys where real), or None where every key is."""

    def __init__(self, lengths: torch.Tensor, length: int, size: int, global_tokens: int, device, masked: bool):
        self.size, self.length, self.global_tokens = size, length, global_tokens
        self.count = (length + size - 1) // size  # integers only: a symbolic length under torch.compile
        self.mask = None
        if masked:
            ranks = torch.arange(self.count * size, device=device)
            real = ranks < lengths[:, None]  # [B, n S]
            keys = (real & (ranks >= global_tokens)).view(-1, self.count, size)  # [B, n, S]
            if global_tokens:
                keys = torch.cat([keys, real[:, None, :global_tokens].expand(-1, self.count, -1)], dim=-1)
            empty = ~keys.any(-1, keepdim=True)  # a block past a sequence's end attends to anything: never read
            self.mask = (keys | empty).flatten(0, 1)[:, None, None, :]

    @property
    def padded(self) -> int:
        """``n S``: the tokens of the blocks, the last one filled with zeros."""
        return self.count * self.size

    def split(self, x: torch.Tensor) -> torch.Tensor:
        """``[B, h, N, F]`` -> ``[B n, h, S, F]``."""
        padded = F.pad(x, (0, 0, 0, self.padded - x.shape[2]))
        return padded.unflatten(2, (self.count, self.size)).transpose(1, 2).flatten(0, 1)

    def keys(self, x: torch.Tensor) -> torch.Tensor:
        """The keys (or values) each block attends to, ``[B n, h, S + g, F]``: its own, then the global ones."""
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
    """Softmax attention inside each block (and to the global keys): rank-ordered ``[B, h, N, d]`` -> ``[B, h, N,
    d]``. Without a mask, the full blocks and a short last one run as two batches, each unmasked."""
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


def summaries(dropped: torch.Tensor, kept: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    """A kernelized mechanism's summary of some keys, ``[..., F, d + 1]``: ``sum_j m_j varphi(k_j)^T v_j`` (with
    ``dropped = m varphi(K)``, key dropout applied) beside ``sum_j varphi(k_j)`` (``kept``, the normaliser's), from
    ``[..., N, F]``, ``[..., N, F]`` and ``value [..., N, d]``."""
    return torch.cat([dropped.transpose(-1, -2) @ value, kept.sum(-2).unsqueeze(-1)], dim=-1)


def memory_terms(query_features, dropped, kept, value, blocks: AlignedBlocks, outside: bool):
    """A kernelized mechanism's terms for every query summed over the keys outside its block (and not global), or
    over every key when ``outside`` is False: rank-ordered ``query_features [B, h, N, F]``, key features ``dropped``
    and ``kept`` ``[B, h, N, F]`` (see :func:`summaries`; zero past the real tokens) and ``value [B, h, N, d]`` ->
    the numerators ``[B, h, N, d]`` and the normalisers ``[B, h, N, 1]``, in at least float32 (sums over N)."""
    query_features, dropped, kept, value = (at_least_float32(x) for x in (query_features, dropped, kept, value))
    every_key = summaries(dropped, kept, value)  # [B, h, F, d + 1]
    if not outside:
        terms = query_features @ every_key
        return terms[..., :-1], terms[..., -1:]
    own_block = summaries(*(blocks.split(x) for x in (dropped, kept, value))).unflatten(0, (-1, blocks.count))
    memory = every_key[:, None] - own_block  # [B, n, h, F, d + 1]
    if blocks.global_tokens:  # exact for every block: block 0 holds them already (global_tokens <= local_block)
        # every token, the others masked out: a product over the g tokens alone, of inner size 1 for g = 1, has
        # torch.export fix the batch size it was traced with
        is_global = (torch.arange(value.shape[2], device=value.device) < blocks.global_tokens)[:, None]
        global_keys = summaries(dropped * is_global, kept * is_global, value)
        later = (torch.arange(blocks.count, device=value.device) > 0).to(value.dtype)[None, :, None, None, None]
        memory = memory - later * global_keys[:, None]
    queries = blocks.split(query_features).unflatten(0, (-1, blocks.count))  # [B, n, h, S, F]
    terms = blocks.merge((queries @ memory).flatten(0, 1))  # [B, h, N, d + 1]
    return terms[..., :-1], terms[..., -1:]


class LocalBlocks(LocalPart):
    """The aligned blocks of one attention layer (see the module docstring); ``mechanism_weight``: with a mechanism
    beside them, the gate's initial ``sigma(mechanism_logit)`` of every head, else None."""

    def __init__(self, num_heads: int, local_block: int, global_tokens: int = 0,
                 mechanism_weight: float | None = None):
        super().__init__(num_heads, global_tokens, mechanism_weight)
        self.size = local_block

    def blocks(self, order: RankOrder, length: int, device) -> AlignedBlocks:
        masked = order.padding_mask is not None or self.global_tokens > 0
        return AlignedBlocks(order.lengths, length, self.size, self.global_tokens, device, masked)

    def softmax(self, query, key, value, order: RankOrder, dropout: nn.Module) -> torch.Tensor:
        """The blocks' softmax with the global tokens' rows exact: rank-ordered ``[B, h, N, d]`` in and out."""
        blocks = self.blocks(order, query.shape[2], query.device)
        dropout_p = dropout.p if dropout.training else 0.0
        context = block_softmax(query, key, value, blocks, dropout_p)
        return self.with_global_rows(context, query, key, value, order.lengths, blocks.padded, dropout)

    def attend(self, query, key, value, padding_mask, dropout: nn.Module,
               output_attentions: bool = False) -> WindowOutput:
        """The blocks alone: ``query``, ``key``, ``value`` ``[B, h, N, d]`` and ``padding_mask [B, N]`` (or None)
        -> :class:`~local_window.WindowOutput`; ``dropout`` acts on the probabilities."""
        batch, _, length, _ = query.shape
        order = RankOrder(padding_mask, batch, length, query.device)
        attentions = self.dense_probabilities(query, key, order) if output_attentions else None
        context = self.softmax(*(order.to_ranks(x) for x in (query, key, value)), order, dropout)
        return WindowOutput(order.to_positions(context), self.global_rows(order, length, query.device), attentions)

    def attend_beside_kernel(self, query, key, value, query_features, key_features, padding_mask, weight,
                             key_dropout, dropout: nn.Module, outside: bool) -> torch.Tensor:
        """The blocks and a kernelized mechanism under one normaliser, ``weight = sigma`` ``[h, 1, 1]`` (the module
        docstring's equation). Inputs ``[B, h, N, *]`` in token positions (key features zero at pads);
        ``key_dropout(like)``: the kept key columns ``[B, h, N, 1]`` or None. Returns the context ``[B, h, N, d]``
        in token positions; the global tokens' rows are exact."""
        batch, _, length, _ = query.shape
        order = RankOrder(padding_mask, batch, length, query.device)
        query, key, value, query_features = (order.to_ranks(x) for x in (query, key, value, query_features))
        key_features = order.zero_past_end(order.to_ranks(key_features))
        keep = key_dropout(key_features)
        dropped = key_features if keep is None else key_features * keep
        blocks = self.blocks(order, length, query.device)
        numerator, normaliser = memory_terms(query_features, dropped, key_features, value, blocks, outside)
        exact = at_least_float32(block_softmax(query, key, value, blocks, dropout.p if dropout.training else 0.0))
        context = ((1 - weight) * exact + weight * numerator) / ((1 - weight) + weight * normaliser)
        context = self.with_global_rows(context.to(value.dtype), query, key, value, order.lengths, blocks.padded,
                                        dropout)
        return order.to_positions(context)

    def exact_ranks(self, query_ranks, key_ranks):
        return torch.div(query_ranks, self.size, rounding_mode="floor") == torch.div(
            key_ranks, self.size, rounding_mode="floor")

    def dense_exact_terms(self, scores, allowed):
        """The softmax probabilities over the exact keys: a block row adds 1 to the shared normaliser."""
        return torch.softmax(at_least_float32(scores).masked_fill(~allowed, -math.inf), dim=-1).nan_to_num(0.0)

    def extra_repr(self) -> str:
        return f"local_block={self.size}, global_tokens={self.global_tokens}"
