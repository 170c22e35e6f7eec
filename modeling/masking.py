"""Padding helpers shared by the mechanisms.

A padding mask is a boolean ``[B, N]`` tensor, True at real tokens. Real tokens need not be
contiguous: every helper here works from each token's rank among the real tokens of its sequence,
so right padding, left padding and holes all give the same result at real positions.
"""

from __future__ import annotations

import torch


def masked_fill_min(logits: torch.Tensor, keep: torch.Tensor | None) -> torch.Tensor:
    """Set ``logits`` to the dtype's lowest value where ``keep`` (broadcastable) is False.

    A finite fill keeps an all-pad row finite (uniform weights) instead of NaN, while any row with
    one real entry gives pads exactly zero weight after a softmax.
    """
    if keep is None:
        return logits
    return logits.masked_fill(~keep, torch.finfo(logits.dtype).min)


def masked_softmax(logits: torch.Tensor, keep: torch.Tensor | None, dim: int) -> torch.Tensor:
    """Softmax over ``dim`` in which entries with ``keep == False`` get zero weight."""
    return torch.softmax(masked_fill_min(logits, keep), dim=dim)


def zero_pads(x: torch.Tensor, padding_mask: torch.Tensor | None, token_dim: int = 1) -> torch.Tensor:
    """Zero the entries of ``x`` (batch first, tokens along ``token_dim``) at pad positions."""
    if padding_mask is None:
        return x
    shape = [1] * x.dim()
    shape[0], shape[token_dim] = padding_mask.shape
    return x * padding_mask.view(shape).to(x.dtype)


def real_lengths(padding_mask: torch.Tensor | None, batch: int, length: int, device) -> torch.Tensor:
    """``[B]`` number of real tokens in each sequence."""
    if padding_mask is None:
        return torch.full((batch,), length, dtype=torch.long, device=device)
    return padding_mask.sum(-1)


def token_ranks(padding_mask: torch.Tensor | None, batch: int, length: int, device) -> torch.Tensor:
    """``[B, N]`` rank of each token among its sequence's real tokens (0-based; pads get the rank
    of the next real token, clamped to the last one)."""
    if padding_mask is None:
        return torch.arange(length, device=device).expand(batch, length)
    ranks = padding_mask.long().cumsum(-1) - padding_mask.long()
    return ranks.clamp(max=length - 1)


def real_positions(padding_mask: torch.Tensor | None, batch: int, length: int, device) -> torch.Tensor:
    """``[B, N]`` absolute position of the t-th real token at index t (undefined past the real length,
    filled with 0): the inverse of :func:`token_ranks` on real tokens."""
    positions = torch.arange(length, device=device).expand(batch, length)
    if padding_mask is None:
        return positions
    # Scatter each real token's position to its rank; pads go to a spare column N, dropped after (no sort:
    # ONNX has no stable sort).
    target = torch.where(padding_mask, token_ranks(padding_mask, batch, length, device), length)
    spare = torch.zeros(batch, length + 1, dtype=positions.dtype, device=device)
    return spare.scatter(1, target, positions)[:, :length]
