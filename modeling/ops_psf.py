"""PSF-Attn's attention as functions on tensors: the Chord links (Eq. 1), the factors' non-zeros (Eq. 3), the exact
factor product that the layer (``attention_psf.py``) runs off its fast paths, and its naive O(N^2) form, which builds
every factor and their product as N x N matrices (for the tests: no layer calls it).

Shapes: B sequences of N tokens, C channels, M factors, K links per row; ``padding_mask [B, N]`` bool, True at real
tokens, or None. The product takes the values ``g(X) [B, N, C]`` and the factors' non-zeros ``weights [M, B, N, K]``
(entry k of token t: its weight on the link ``(t + offsets[k]) mod L_b``, counted among the real tokens, L_b the
sequence's real length); ``residual``: each factor applied as ``W_m V + V``. One factor's product is one of
``chord_mixes.py`` (or, on the fast paths, ``chord_kernels.py``).
"""

from __future__ import annotations

from functools import partial

import torch
import torch.nn.functional as F

from .attention_base import AttentionOutput
from .chord_mixes import ChordShiftMix, circular_rows, cyclic_chord_mix
from .masking import real_lengths, real_positions, token_ranks


def take_tokens(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``x [..., B, N, W]`` with its tokens taken in the order ``index [B, N]`` along N, same shape."""
    return torch.gather(x, -2, index.unsqueeze(-1).expand_as(x))


def sequence_lengths(values: torch.Tensor, padding_mask: torch.Tensor | None) -> torch.Tensor:
    """Each sequence's real length ``[B]`` (int64, at least 1) for ``values [B, N, C]`` and ``padding_mask``."""
    return real_lengths(padding_mask, *values.shape[:2], values.device).clamp(min=1)


def chord_offsets(num_links: int) -> list[int]:
    """The K link offsets of Eq. 1: ``[0, 1, 2, 4, ..., 2^(K-2)]``."""
    return [0] + [2**k for k in range(num_links - 1)]


def chord_links(padding_mask: torch.Tensor | None, batch: int, length: int, num_links: int, device) -> torch.Tensor:
    """``[B, N, K]`` absolute index of each token's K Chord links (Eq. 1), per sequence over its real tokens."""
    offsets = torch.tensor(chord_offsets(num_links), device=device)
    ranks = token_ranks(padding_mask, batch, length, device)  # [B, N]
    lengths = real_lengths(padding_mask, batch, length, device).clamp(min=1)[:, None, None]
    linked_ranks = (ranks[..., None] + offsets) % lengths  # [B, N, K]
    positions = real_positions(padding_mask, batch, length, device)
    return torch.gather(positions, 1, linked_ranks.view(batch, length * num_links)).view(batch, length, num_links)


def chord_factor_weights(hidden_states: torch.Tensor, in_weight: torch.Tensor, in_bias: torch.Tensor,
                         out_weight: torch.Tensor, out_bias: torch.Tensor) -> torch.Tensor:
    """Non-zeros of every factor, ``f_m(X) = GELU(X W_in + b_in) W_out + b_out`` (Eq. 3), ``[M, B, N, K]``, from
    ``hidden_states [B, N, C]`` and the M MLPs' weights ``in_weight [M, C, hidden]``, ``in_bias [M, 1, hidden]``,
    ``out_weight [M, hidden, K]``, ``out_bias [M, 1, K]``. The M first layers run as one ``[C, M * hidden]`` GEMM,
    so the backward to X is one GEMM too (no ``[M, B * N, C]`` gradient to sum)."""
    batch, length, width = hidden_states.shape
    num_factors, _, hidden_width = in_weight.shape
    hidden = torch.addmm(in_bias.reshape(-1), hidden_states.reshape(-1, width),
                         in_weight.permute(1, 0, 2).reshape(width, num_factors * hidden_width))
    hidden = F.gelu(hidden).view(-1, num_factors, hidden_width).transpose(0, 1)  # [M, B * N, hidden]
    return torch.baddbmm(out_bias, hidden, out_weight).view(num_factors, batch, length, out_weight.shape[-1])


def cyclic_factor(link_mix, values: torch.Tensor, padding_mask: torch.Tensor | None, num_links: int):
    """``link_mix(values, weights, rows, offsets)`` (``chord_mixes.cyclic_chord_mix`` or its plain twin) as a factor
    of :func:`factor_product`, its rows (``chord_mixes.circular_rows``) made once for every factor of ``values [B, N,
    C]``."""
    offsets = chord_offsets(num_links)
    rows = circular_rows(sequence_lengths(values, padding_mask), values.shape[1], max(offsets))
    return partial(link_mix, rows=rows, offsets=offsets)


def factor_product(values: torch.Tensor, weights: torch.Tensor, factor, residual: bool) -> torch.Tensor:
    """``factor(values [B, N, C], weights[m] [B, N, K]) -> [B, N, C]`` applied for m = M .. 1, with ``residual`` the
    values added after each."""
    for m in reversed(range(weights.shape[0])):
        mixed = factor(values, weights[m])
        values = mixed + values if residual else mixed
    return values


def in_rank_order(values: torch.Tensor, weights: torch.Tensor, padding_mask: torch.Tensor | None, factor,
                  residual: bool) -> torch.Tensor:
    """:func:`factor_product`, with a mask on ``values`` and ``weights`` put in rank order once (each sequence's real
    tokens first) and its result put back at the token positions."""
    if padding_mask is None:
        return factor_product(values, weights, factor, residual)
    batch, length, _ = values.shape
    order = real_positions(padding_mask, batch, length, values.device)  # [B, N]: position of rank t
    mixed = factor_product(take_tokens(values, order), take_tokens(weights, order), factor, residual)
    return take_tokens(mixed, token_ranks(padding_mask, batch, length, values.device))


def psf_attention(values: torch.Tensor, weights: torch.Tensor, padding_mask: torch.Tensor | None = None,
                  residual: bool = False) -> torch.Tensor:
    """``W_1 (W_2 (... (W_M V)))`` ``[B, N, C]`` in the weights' dtype, in PyTorch operations (the exact path; the
    arguments: the module docstring). Without a mask each link is a cyclic shift (``ChordShiftMix``); with one, every
    factor reads slices of the values in rank order, repeated cyclically over each sequence's real length
    (``ChordLinkMix``): exact for any mask, and an unpadded row costs one extra row copy per factor, not K."""
    values = values.to(weights.dtype)
    if padding_mask is None:
        offsets = chord_offsets(weights.shape[-1])
        return factor_product(values, weights, lambda v, w: ChordShiftMix.apply(v, w, offsets), residual)
    factor = cyclic_factor(cyclic_chord_mix, values, padding_mask, weights.shape[-1])
    return in_rank_order(values, weights, padding_mask, factor, residual)


def naive_psf_attention(values: torch.Tensor, weights: torch.Tensor, padding_mask: torch.Tensor | None = None,
                        residual: bool = False) -> AttentionOutput:
    """PSF-Attn with every factor and their product built as N x N matrices and applied (Khalitov et al. 2022, Secs.
    3-4; the arguments: the module docstring).

    Eq. 1: in a sequence of L real tokens, the token of rank t links to the ranks ``(t + 2^k) mod L``, k = 0 .. K-2,
    and to itself; Eq. 3: factor ``W_m`` holds the token's weights on its links (links that meet add up), ``W_m + I``
    with ``residual``; ``A = W_1 W_2 ... W_M``, ``context = A V``; pads have no row and no column.

    Returns the layer's output (``attention_base.AttentionOutput``): the context ``[B, N, C]`` (its rows at pads zero)
    and ``A [B, 1, N, N]`` (one head)."""
    num_factors, batch, length, num_links = weights.shape
    real = torch.ones(batch, length, dtype=torch.bool) if padding_mask is None else padding_mask
    identity = torch.diag_embed(real.to(weights.dtype))  # [B, N, N]: one on the real tokens' diagonal
    offsets = [0] + [2**k for k in range(num_links - 1)]
    attention = identity
    for m in range(num_factors):
        factor = torch.zeros(batch, length, length, dtype=weights.dtype)
        for b in range(batch):
            positions = real[b].nonzero().squeeze(-1)  # rank t -> position
            ranks = torch.arange(len(positions))
            for k, offset in enumerate(offsets):
                linked = positions[(ranks + offset) % len(positions)]
                factor[b] = factor[b].index_put((positions, linked), weights[m, b, positions, k], accumulate=True)
        attention = attention @ (factor + identity if residual else factor)
    return AttentionOutput(attention @ values.to(weights.dtype), attentions=attention[:, None])
