"""PSF-Attn's factor product as Triton kernels: the fast path of :meth:`attention_psf.PSFAttention.mix` on CUDA.

One factor of PSF (``attention_psf.py``, Eq. 1 and 3) mixes each token's K Chord links::

    out[b, t] = sum_k weights[b, t, k] values[b, (t + offsets[k]) mod L_b]      t < N, L_b the real length

over values and weights in rank order (the real tokens first), with ``offsets[k]`` = 0, 1, 2, 4, ..., 2^(K-2)
(``attention_psf.chord_offsets``; in the kernels the compile-time constant ``(1 << k) >> 1``). The exact path applies
it as K multiply-adds over the whole ``[B, N, C]`` tensor, each reading and writing it in float32 (3K passes over
memory a factor, 42 at K = 14); here one program takes a tile of tokens and channels, gathers each token's K linked
rows and sums them in registers, so a factor reads the values from memory about once (the linked rows come from the
cache) and writes the result once (:func:`_gather_links`: on an H200 about three times a copy of the values); the
offsets and the tile sizes are compile-time constants. The backward is two gathers too: the same kernel transposed
for the values, one of dot products for the weights::

    grad_values[b, s]     = sum_k weights[b, t_k, k] grad[b, t_k],   t_k = (s - offsets[k]) mod L_b,   s < L_b
    grad_weights[b, t, k] = grad[b, t] . values[b, (t + offsets[k]) mod L_b]

where ``t_k`` is the one real row whose link k is s; the rows past the real length (pads, in rank order at the end)
link into the real rows too, and their share of ``grad_values`` is added by a third kernel with atomic adds, run
only when the caller passes a padding mask (so the sum over pad rows is not in a fixed order).

Values in float32 or bfloat16, weights in float32, every sum in float32. The values (and each factor's result, and
the gradient to them) are stored in the values' dtype: in bfloat16 a factor reads and writes half the bytes of the
float32 path, its K gathered rows included (on an H200 the gathers run at the cache's bandwidth: docs/results.md).
Bfloat16 has float32's range, so a product of unnormalised factors cannot overflow in it where it would not in
float32; each factor's result is rounded to its 8 significant bits once (float16 would overflow: PSF passes float16
values in float32). In float32 the kernels give the exact path's numbers to rounding (``tests/mechanisms/
test_chord_kernels.py`` compares them in Triton's interpreter on a CPU, ``TRITON_INTERPRET=1``, and on CUDA in the
device lane); in bfloat16, the float64 reference's to bfloat16's rounding of each factor. The pad rows' share of the
gradient to the values is summed in float32 (atomic adds), then stored in the values' dtype. Every index is formed
from non-negative operands (``%`` differs between C and Python on negatives).
"""

from __future__ import annotations

import torch
from torch.autograd.function import once_differentiable

try:  # in a try, so that Transformers' check of remote code's imports passes where Triton is absent (CPU machines)
    import triton
    import triton.language as tl
except ImportError as error:  # fast_paths.obstacle keeps this module unimported there: reaching this is a bug
    raise ImportError("PSF's CUDA kernels need Triton, which comes with PyTorch's CUDA builds: pip install triton") \
        from error

# Each kernel's tile of tokens and of channels and its warps, timed on an H200 (benchmarks/gpu/chord_kernel_tiles.py)
GATHER_TILE = (8, 64, 4)  # _gather_links and _values_backward_from_pads (32, 128, 4 took 8x as long)
WEIGHTS_TILE = (32, 32, 8)  # _weights_backward (32, 128, 4: 1.8x as long)


@triton.jit
def _gather_links(source, weights, lengths, out, N, C, K: tl.constexpr, TRANSPOSED: tl.constexpr,
                  BLOCK_T: tl.constexpr, BLOCK_C: tl.constexpr):
    """``out [B, N, C]``, row by row: ``out[t] = sum_k weights[t, k] source[(t + offsets[k]) mod L]`` (the factor
    applied to the values), or with ``TRANSPOSED`` ``out[s] = sum_k weights[t_k, k] source[t_k]``, ``t_k = (s -
    offsets[k]) mod L`` (the gradient to the values from the real rows, ``source`` the upstream gradient; zero past
    the real length). Grid (N / BLOCK_T, C / BLOCK_C, B)."""
    rows = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
    channels = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    batch = tl.program_id(2).to(tl.int64)
    length = tl.load(lengths + batch)
    if TRANSPOSED:
        valid = rows < length  # the rows past the real length are no real row's link
    else:
        valid = rows < N
    tile = valid[:, None] & (channels < C)[None, :]
    acc = tl.zeros((BLOCK_T, BLOCK_C), dtype=tl.float32)
    for k in tl.static_range(K):
        if TRANSPOSED:
            linked = ((rows + length - ((1 << k) >> 1) % length) % length).to(tl.int64)  # (s - offset) mod L
            weighted = linked
        else:
            linked = ((rows + ((1 << k) >> 1)) % length).to(tl.int64)
            weighted = rows
        weight = tl.load(weights + (batch * N + weighted) * K + k, mask=valid, other=0.0)
        linked_rows = tl.load(source + (batch * N + linked[:, None]) * C + channels[None, :], mask=tile, other=0.0)
        acc += weight[:, None] * linked_rows.to(tl.float32)
    tl.store(out + (batch * N + rows[:, None]) * C + channels[None, :], acc.to(out.dtype.element_ty),
             mask=(rows < N)[:, None] & (channels < C)[None, :])


@triton.jit
def _weights_backward(values, grad, lengths, grad_weights, N, C, K: tl.constexpr, K_PAD: tl.constexpr,
                      BLOCK_T: tl.constexpr, BLOCK_C: tl.constexpr):
    """``grad_weights [B, N, K]``; grid (N / BLOCK_T, B), each program over every tile of channels."""
    tokens = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
    batch = tl.program_id(1).to(tl.int64)
    length = tl.load(lengths + batch)
    in_rows, links = tokens < N, tl.arange(0, K_PAD)
    acc = tl.zeros((BLOCK_T, K_PAD), dtype=tl.float32)
    for start in range(0, C, BLOCK_C):
        channels = start + tl.arange(0, BLOCK_C)
        tile = in_rows[:, None] & (channels < C)[None, :]
        upstream = tl.load(grad + (batch * N + tokens[:, None]) * C + channels[None, :], mask=tile, other=0.0)
        upstream = upstream.to(tl.float32)
        for k in tl.static_range(K):
            rows = ((tokens + ((1 << k) >> 1)) % length).to(tl.int64)
            linked = tl.load(values + (batch * N + rows[:, None]) * C + channels[None, :], mask=tile, other=0.0)
            dots = tl.sum(upstream * linked.to(tl.float32), axis=1)
            acc += tl.where(links[None, :] == k, dots[:, None], 0.0)
    tl.store(grad_weights + (batch * N + tokens[:, None]) * K + links[None, :], acc.to(grad_weights.dtype.element_ty),
             mask=in_rows[:, None] & (links < K)[None, :])


@triton.jit
def _values_backward_from_pads(weights, grad, lengths, grad_values, N, C, K: tl.constexpr,
                               BLOCK_T: tl.constexpr, BLOCK_C: tl.constexpr):
    """Adds the pad rows' share to ``grad_values`` (float32), atomically; grid as the forward's."""
    tokens = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
    channels = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    batch = tl.program_id(2).to(tl.int64)
    length = tl.load(lengths + batch)
    pads = (tokens >= length) & (tokens < N)
    tile = pads[:, None] & (channels < C)[None, :]
    upstream = tl.load(grad + (batch * N + tokens[:, None]) * C + channels[None, :], mask=tile, other=0.0)
    upstream = upstream.to(tl.float32)
    for k in tl.static_range(K):
        rows = ((tokens + ((1 << k) >> 1)) % length).to(tl.int64)
        weight = tl.load(weights + (batch * N + tokens) * K + k, mask=pads, other=0.0)
        tl.atomic_add(grad_values + (batch * N + rows[:, None]) * C + channels[None, :], weight[:, None] * upstream,
                      mask=tile)


def _grid(tokens: int, channels: int, batch: int) -> tuple[int, int, int]:
    return triton.cdiv(tokens, GATHER_TILE[0]), triton.cdiv(channels, GATHER_TILE[1]), batch


def gather_links(source, weights, lengths, transposed: bool, dtype: torch.dtype | None = None) -> torch.Tensor:
    """:func:`_gather_links` of ``source [B, N, C]`` on ``GATHER_TILE``: a factor's product, or its gradient to the
    values from the real rows (``transposed``), in ``dtype`` (default: ``source``'s)."""
    batch, length, width = source.shape
    out = torch.empty_like(source, dtype=dtype)
    tokens, channels, warps = GATHER_TILE
    _gather_links[_grid(length, width, batch)](source, weights, lengths, out, length, width, K=weights.shape[2],
                                               TRANSPOSED=transposed, BLOCK_T=tokens, BLOCK_C=channels,
                                               num_warps=warps)
    return out


def weights_backward(values, grad, lengths, links: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """:func:`_weights_backward` on ``WEIGHTS_TILE``: ``grad_weights [B, N, K]`` of a factor, in ``dtype``."""
    batch, length, width = values.shape
    grad_weights = values.new_empty(batch, length, links, dtype=dtype)
    tokens, channels, warps = WEIGHTS_TILE
    _weights_backward[(triton.cdiv(length, tokens), batch)](
        values, grad, lengths, grad_weights, length, width, K=links, K_PAD=triton.next_power_of_2(links),
        BLOCK_T=tokens, BLOCK_C=channels, num_warps=warps)
    return grad_weights


class ChordKernelMix(torch.autograd.Function):
    """One factor: ``values [B, N, C]`` (float32 or bfloat16) and ``weights [B, N, K]`` (float32), both in rank order,
    ``lengths [B]`` (int64, each at least 1), ``pads``: whether rows past a real length may exist -> ``[B, N, C]`` in
    the values' dtype (module docstring). Differentiable once, as the exact path's mixes."""

    @staticmethod
    def forward(ctx, values, weights, lengths, pads):
        values, weights = values.contiguous(), weights.contiguous()
        ctx.save_for_backward(values, weights, lengths)
        ctx.pads = pads
        return gather_links(values, weights, lengths, transposed=False)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        values, weights, lengths = ctx.saved_tensors
        grad = grad.contiguous()
        grad_weights = weights_backward(values, grad, lengths, weights.shape[2], weights.dtype)
        if not ctx.pads:
            return gather_links(grad, weights, lengths, transposed=True), grad_weights, None, None
        grad_values = gather_links(grad, weights, lengths, transposed=True, dtype=torch.float32)
        batch, length, width = values.shape
        tokens, channels, warps = GATHER_TILE
        _values_backward_from_pads[_grid(length, width, batch)](
            weights, grad, lengths, grad_values, length, width, K=weights.shape[2], BLOCK_T=tokens, BLOCK_C=channels,
            num_warps=warps)
        return grad_values.to(values.dtype), grad_weights, None, None


def chord_mix(values: torch.Tensor, weights: torch.Tensor, lengths: torch.Tensor, pads: bool) -> torch.Tensor:
    """:class:`ChordKernelMix` of ``values [B, N, C]`` (float32 or bfloat16) and ``weights [B, N, K]`` (float32), in
    rank order, over the real ``lengths [B]`` (int64, each at least 1)."""
    return ChordKernelMix.apply(values, weights, lengths, pads)
