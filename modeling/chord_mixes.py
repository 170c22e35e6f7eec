"""One factor of PSF-Attn (``attention_psf.py``) in PyTorch operations: a Chord sparse matrix times the values.

A factor mixes each token's K Chord links (Eq. 1 and 3)::

    out[b, t] = sum_k weights[b, t, k] values[b, (t + offsets[k]) mod L_b]      t < N, L_b the real length

over values and weights in rank order (the real tokens first). The exact path has two products with hand-written
backwards, chosen by what the caller passes: :class:`ChordShiftMix` without a padding mask (each link a cyclic shift,
read in place from two slices) and :class:`ChordLinkMix` with one (the values repeated cyclically over each
sequence's real length, :func:`circular_rows`, so that every link is again a slice). :func:`plain_chord_mix` is
the second in plain operations, the function PSF's fast path on a CPU compiles (``torch.compile`` fuses the K
multiply-adds, forward and backward, into one loop a factor; CUDA has Triton kernels instead, ``chord_kernels.py``).
"""

from __future__ import annotations

import torch
from torch.autograd.function import once_differentiable


def row_dots(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``[B, n, C] . [B, n, C] -> [B, n]``, the dot product of each pair of rows, without a ``[B, n, C]`` product
    (an einsum runs as batched dot products: faster than ``mul`` then ``sum``, and no ``out=`` views, which
    ``torch.compile`` refuses)."""
    return torch.einsum("bnc,bnc->bn", a, b)


def circular_rows(lengths: torch.Tensor, length: int, window: int) -> torch.Tensor:
    """``[B * (N + window)]`` row indices into values kept in rank order and flattened to ``[B * N, C]``, for sequences
    of real ``lengths [B]`` (each at least 1): row ``t`` of sequence b reads its rank ``t mod L_b``, so that the first
    N + window rows repeat its L_b real tokens cyclically and the link ``(t + o) mod L_b`` of Eq. 1 is simply row
    ``t + o`` for every offset ``o <= window``."""
    rows = torch.arange(length + window, device=lengths.device) % lengths[:, None]  # [B, N + window]
    return (rows + torch.arange(lengths.shape[0], device=lengths.device)[:, None] * length).view(-1)


class ChordLinkMix(torch.autograd.Function):
    """``out[:, t] = sum_k weights[:, t, k] extended[:, t + offsets[k]]``: ``extended [B, N + window, C]`` (the
    values repeated cyclically, see :func:`circular_rows`), ``weights [B, N, K]`` -> ``[B, N, C]``. Each link reads
    one slice of ``extended`` in place (no gather, no index); the hand-written backward does the same::

        grad_extended[:, t + offsets[k]] += weights[:, t, k] grad[:, t]
        grad_weights[:, t, k]             = grad[:, t] . extended[:, t + offsets[k]]

    Its buffers are reused in place, so it is differentiable once (a double backward raises)."""

    @staticmethod
    def forward(ctx, extended, weights, offsets):
        ctx.save_for_backward(extended, weights)
        ctx.offsets = offsets
        length = weights.shape[1]
        mixed = extended.new_zeros(extended.shape[0], length, extended.shape[2])
        for k, offset in enumerate(offsets):
            mixed.addcmul_(extended[:, offset : offset + length], weights[:, :, k, None])
        return mixed

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        extended, weights = ctx.saved_tensors
        grad, length = grad.contiguous(), weights.shape[1]
        grad_extended, grad_weights = torch.zeros_like(extended), torch.empty_like(weights)
        for k, offset in enumerate(ctx.offsets):
            grad_extended[:, offset : offset + length].addcmul_(grad, weights[:, :, k, None])
            grad_weights[:, :, k] = row_dots(grad, extended[:, offset : offset + length])
        return grad_extended, grad_weights, None


def cyclic_chord_mix(values: torch.Tensor, weights: torch.Tensor, rows: torch.Tensor, offsets: list[int],
                     link_mix=ChordLinkMix.apply) -> torch.Tensor:
    """``link_mix`` (:class:`ChordLinkMix`) of ``values [B, N, C]`` (rank order) repeated cyclically over each
    sequence's real length by ``rows`` (:func:`circular_rows`, window ``max(offsets)``) and ``weights [B, N, K]``
    -> ``[B, N, C]``."""
    batch, length, width = values.shape
    extended = values.reshape(-1, width).index_select(0, rows).view(batch, length + max(offsets), width)
    return link_mix(extended, weights, offsets)


def summed_links(extended: torch.Tensor, weights: torch.Tensor, offsets: list[int]) -> torch.Tensor:
    """:class:`ChordLinkMix`'s product in plain operations, left to autograd: what ``torch.compile`` fuses, forward
    and backward, into one loop over the tokens (PSF's fast path on a CPU, ``PSFAttention.mix_compiled``)."""
    length = weights.shape[1]
    return sum(extended[:, offset:offset + length] * weights[:, :, k, None] for k, offset in enumerate(offsets))


def plain_chord_mix(values, weights, rows, offsets) -> torch.Tensor:
    """:func:`cyclic_chord_mix` by :func:`summed_links`, the function the CPU's fast path compiles."""
    return cyclic_chord_mix(values, weights, rows, offsets, link_mix=summed_links)


def shift_pieces(length: int, offsets: list[int]):
    """For a sequence of ``length`` tokens without padding, link k of token t is ``(t + offsets[k]) mod length``:
    yields ``(k, rows, linked)``, pairs of slices with ``linked`` the rows of ``rows`` shifted by the offset
    (at most two pairs per link: before and after the wrap)."""
    for k, offset in enumerate(offsets):
        shift = offset % length
        yield k, slice(0, length - shift), slice(shift, length)
        if shift:
            yield k, slice(length - shift, length), slice(0, shift)


class ChordShiftMix(torch.autograd.Function):
    """:class:`ChordLinkMix` for a batch without padding, where every sequence has all N tokens: each link is a
    cyclic shift, so the linked rows are read in place from slices of the values (no gather, no index, no
    buffer in the forward). ``values [B, N, C]``, ``weights [B, N, K]``, ``offsets`` (:func:`chord_offsets`)
    -> ``[B, N, C]``. Differentiable once, like :class:`ChordLinkMix`."""

    @staticmethod
    def forward(ctx, values, weights, offsets):
        ctx.save_for_backward(values, weights)
        ctx.offsets = offsets
        mixed = torch.zeros_like(values)
        for k, rows, linked in shift_pieces(values.shape[1], offsets):
            mixed[:, rows].addcmul_(values[:, linked], weights[:, rows, k, None])
        return mixed

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        values, weights = ctx.saved_tensors
        grad = grad.contiguous()
        grad_values, grad_weights = torch.zeros_like(values), torch.empty_like(weights)
        for k, rows, linked in shift_pieces(values.shape[1], ctx.offsets):
            grad_values[:, linked].addcmul_(grad[:, rows], weights[:, rows, k, None])
            grad_weights[:, rows, k] = row_dots(grad[:, rows], values[:, linked])
        return grad_values, grad_weights, None
