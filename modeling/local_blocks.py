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

* every mechanism is mixed per head, ``(1 - sigma) blocks(x) + sigma mechanism(x)`` (``attention_base.py``), the
  kernelized ones too by default (their setting ``shared_normaliser`` None or False: the blocks' softmax stays exact);
* a kernelized mechanism (``kernel_attention.py``) with ``shared_normaliser`` True shares one normaliser with the
  block's softmax, whose terms enter with the block's own normaliser (a block row's softmax weights sum to 1)::

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
from .masking import exporting_graph


class AlignedBlocks:
    """Rank-ordered ``[B, h, N, F]`` tensors as ``n = ceil(N / S)`` aligned blocks of S tokens, batched as ``[B n,
    h, S, F]`` (zeros after the last token), and which keys each block's queries attend to: ``mask [B n, 1, 1, S +
    g]`` (its real keys that are not global, then the g global keys where real), or None where every key is."""

    def __init__(self, lengths: torch.Tensor, length: int, size: int, global_tokens: int, device, masked: bool):
        self.size, self.length, self.global_tokens = size, length, global_tokens
        self.count = (length + size - 1) // size  # integers only: a symbolic length under torch.compile
        if exporting_graph():  # one block more, never read: traced on one block, the graph would keep n = 1
            self.count += 1  # (torch.export fixes a size of 1, and with it the shapes computed from it)
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

    def pad(self, x: torch.Tensor) -> torch.Tensor:
        """``[B, h, N, F]`` -> ``[B, h, n S, F]``, zeros after the last token (``x`` itself where ``N = n S``)."""
        missing = self.padded - x.shape[2]
        return F.pad(x, (0, 0, 0, missing)) if missing else x

    def split(self, x: torch.Tensor) -> torch.Tensor:
        """``[B, h, N, F]`` -> ``[B n, h, S, F]``: a view of the projections where ``N = n S`` (the flash kernel
        takes their strides), so that the blocks cost no copy."""
        return self.pad(x).unflatten(2, (self.count, self.size)).transpose(1, 2).flatten(0, 1)

    def batched(self, x: torch.Tensor) -> torch.Tensor:
        """``[B, h, N, F]`` -> ``[B h n, S, F]``, one matrix a block and head (what ``torch.bmm`` takes)."""
        return self.pad(x).reshape(-1, self.size, x.shape[-1])

    def tokens(self, y: torch.Tensor, heads: int) -> torch.Tensor:
        """``[B h n, S, F]`` -> ``[B, h, N, F]`` (:meth:`batched`'s inverse)."""
        return y.view(-1, heads, self.padded, y.shape[-1])[:, :, :self.length]

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


def summaries(dropped: torch.Tensor, kept: torch.Tensor, value: torch.Tensor):
    """A kernelized mechanism's summary of each of G groups of keys: ``sum_s m_s varphi(k_s)^T v_s`` ``[G, F, d]``
    (with ``dropped = m varphi(K)``, key dropout applied) and ``sum_s varphi(k_s)`` ``[G, F]`` (``kept``, the
    normaliser's), from ``[G, S, F]``, ``[G, S, F]`` and ``value [G, S, d]``."""
    return torch.bmm(dropped.transpose(1, 2), value), kept.sum(1)


def memory_terms(query_features, dropped, kept, value, blocks: AlignedBlocks, outside: bool):
    """A kernelized mechanism's terms for every query summed over the keys outside its block (and not global), or
    over every key when ``outside`` is False: rank-ordered ``query_features [B, h, N, F]``, key features ``dropped``
    and ``kept`` ``[B, h, N, F]`` (see :func:`summaries`; zero past the real tokens) and ``value [B, h, N, d]`` ->
    the numerators ``[B, h, N, d]`` and the normalisers ``[B, h, N, 1]``, in at least float32 (sums over N).

    Each block's summary is one product over its S keys (``[B h n]`` of them in one ``torch.bmm``); the summary over
    every key is their sum over the blocks, and the memory of a block is that sum less its own summary. (One product
    over all N keys would give the same sum, but as a matrix product with a long inner dimension and few outputs,
    which a GPU runs on a handful of its multiprocessors.)"""
    batch, heads = value.shape[:2]
    query_features, dropped, kept, value = (at_least_float32(x) for x in (query_features, dropped, kept, value))
    keys = blocks.batched(dropped)  # [B h n, S, F]
    kept_keys, values = keys if kept is dropped else blocks.batched(kept), blocks.batched(value)
    products, sums = (x.unflatten(0, (batch, heads, blocks.count)) for x in summaries(keys, kept_keys, values))
    memory, memory_sums = products.sum(2, keepdim=True), sums.sum(2, keepdim=True)  # every key's, [B, h, 1, F, *]
    if outside:
        memory, memory_sums = memory - products, memory_sums - sums
        if blocks.global_tokens:  # exact for every block: block 0 holds them already (global_tokens <= local_block)
            # block 0's keys, the others masked out: a product over the g tokens alone, of inner size 1 for g = 1,
            # has torch.export fix the batch size it was traced with
            is_global = (torch.arange(blocks.size, device=value.device) < blocks.global_tokens)[:, None]
            first = [x.unflatten(0, (-1, blocks.count))[:, 0] for x in (keys, kept_keys, values)]  # [B h, S, *]
            global_products, global_sums = (x.unflatten(0, (batch, heads))[:, :, None] for x in summaries(
                first[0] * is_global, first[1] * is_global, first[2]))
            later = (torch.arange(blocks.count, device=value.device) > 0).to(value.dtype)[:, None]  # [n, 1]
            memory = memory - later[..., None] * global_products
            memory_sums = memory_sums - later * global_sums
    memory, memory_sums = (x.expand(-1, -1, blocks.count, *x.shape[3:]).flatten(0, 2)
                           for x in (memory, memory_sums))  # [B h n, F, *]
    queries = blocks.batched(query_features)  # [B h n, S, F]
    numerator = torch.bmm(queries, memory)
    normaliser = torch.bmm(queries, memory_sums.unsqueeze(-1))
    return blocks.tokens(numerator, heads), blocks.tokens(normaliser, heads)


class LocalBlocks(LocalPart):
    """The aligned blocks of one attention layer (see the module docstring); ``mechanism_weight``: with a mechanism
    beside them, the gate's initial ``sigma(mechanism_logit)`` of every head, else None."""

    def __init__(self, num_heads: int, local_block: int, global_tokens: int = 0,
                 mechanism_weight: float | None = None):
        super().__init__(num_heads, global_tokens, mechanism_weight)
        self.size = local_block

    def blocks(self, order: RankOrder, length: int, device) -> AlignedBlocks:
        # an exported graph takes the masked path, whose shapes follow the length (not full blocks and a short one)
        masked = order.padding_mask is not None or self.global_tokens > 0 or exporting_graph()
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
                             mechanism: nn.Module) -> torch.Tensor:
        """The blocks and a kernelized mechanism under one normaliser, ``weight = sigma`` ``[h, 1, 1]`` (the module
        docstring's equation). Inputs ``[B, h, N, *]`` in token positions (key features zero at pads);
        ``mechanism``: the kernelized mechanism, whose ``key_dropout`` gives the key columns its dropout keeps,
        ``dropout`` the blocks' and ``mechanism_outside_window`` the keys of its memory. Returns the context ``[B, h,
        N, d]`` in token positions; the global tokens' rows are exact."""
        batch, _, length, _ = query.shape
        order = RankOrder(padding_mask, batch, length, query.device)
        query, key, value, query_features = (order.to_ranks(x) for x in (query, key, value, query_features))
        key_features = order.zero_past_end(order.to_ranks(key_features))
        keep, dropout = mechanism.key_dropout(key_features), mechanism.dropout
        dropped = key_features if keep is None else key_features * keep
        blocks = self.blocks(order, length, query.device)
        numerator, normaliser = memory_terms(query_features, dropped, key_features, value, blocks,
                                             mechanism.mechanism_outside_window)
        exact = block_softmax(query, key, value, blocks, dropout.p if dropout.training else 0.0)
        weight = weight.to(numerator.dtype)
        # ((1 - sigma) exact + sigma numerator) / ((1 - sigma) + sigma normaliser), in two fused operations
        context = torch.lerp(exact.to(numerator.dtype), numerator, weight) / torch.addcmul(1 - weight, weight,
                                                                                            normaliser)
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
