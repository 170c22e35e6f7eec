"""Padding helpers shared by the mechanisms, and the padding mask read from a model's ``attention_mask``.

A padding mask is a boolean ``[B, N]`` tensor, True at real tokens. Real tokens need not be
contiguous: every helper here works from each token's rank among the real tokens of its sequence,
so right padding, left padding and holes all give the same result at real positions.
"""

from __future__ import annotations

import torch

# An additive mask entry at or below this hides its key (the dtype's minimum; -10000 in older code).
ADDITIVE_MASKED = -1000.0
PASS_2D = "pass the [B, N] padding mask instead (1 at real tokens, 0 at pads)"


def padding_mask_from(attention_mask: torch.Tensor | None, batch: int, length: int) -> torch.Tensor | None:
    """The ``[B, N]`` bool padding mask from ``attention_mask``, ``[B, N]`` (nonzero at real tokens) or
    Transformers' broadcast ``[B, 1, 1, N]`` / ``[B, 1, N, N]`` (bool, 0/1 or additive); None without pads (eager mode
    only), so that the unpadded paths run. ``ValueError`` for other shapes, and for a 4-D mask that hides different
    keys from different queries (causal, a bias); its values are checked in eager mode only."""
    if attention_mask is None:
        return None
    shape = tuple(attention_mask.shape)
    if shape == (batch, length):
        return without_padding_as_none(attention_mask.bool())
    if len(shape) == 4 and shape[:2] == (batch, 1) and shape[2] in (1, length) and shape[3] == length:
        return without_padding_as_none(padding_mask_from_4d(attention_mask))
    raise ValueError(
        f"attention_mask of shape {list(shape)} does not fit an input of {batch} sequences of {length} tokens: "
        f"pass [B, N] = [{batch}, {length}] (1 at real tokens, 0 at pads), or its broadcast as Transformers "
        f"prepares it, [{batch}, 1, 1, {length}] or [{batch}, 1, {length}, {length}]."
    )


def padding_mask_from_4d(attention_mask: torch.Tensor) -> torch.Tensor:
    """``[B, N]``: the keys that some query of a ``[B, 1, Q, N]`` mask sees. A float mask is 0/1 if all its
    values are 0 or 1 and one is 1, else additive (a ``where``, which compiles and exports)."""
    rows = attention_mask[:, 0]  # [B, Q, N]
    if rows.dtype == torch.bool:
        seen = rows
    elif not rows.is_floating_point():
        seen = rows != 0
    else:
        seen = torch.where(is_zero_one(rows), rows == 1, rows == 0)
    padding_mask = seen.any(1)
    if not capturing_graph():
        check_padding_broadcast(rows, seen, padding_mask)
    return padding_mask


def capturing_graph() -> bool:
    """Whether the code runs under ``torch.compile``, ``torch.export`` or tracing, where a branch on tensor values
    breaks the graph."""
    return torch.compiler.is_compiling() or exporting_graph()


def exporting_graph() -> bool:
    """Whether the code runs under ``torch.export`` or tracing: one graph for every shape, so that a branch on a
    shape, or a size of 1, would bake the traced one in."""
    return torch.compiler.is_exporting() or torch.jit.is_tracing()


def without_padding_as_none(padding_mask: torch.Tensor) -> torch.Tensor | None:
    """None when every token is real, in eager mode (as Transformers' sdpa path drops an all-ones mask)."""
    if capturing_graph() or not bool(padding_mask.all()):
        return padding_mask
    return None


def is_zero_one(values: torch.Tensor) -> torch.Tensor:
    """0-d bool: all ``values`` are 0 or 1, and one is 1 (all zeros is an additive mask without pads)."""
    return ((values == 0) | (values == 1)).all() & (values == 1).any()


def check_padding_broadcast(rows: torch.Tensor, seen: torch.Tensor, padding_mask: torch.Tensor) -> None:
    """Raise unless ``rows [B, Q, N]`` hold mask values and each query sees (``seen``) the keys of
    ``padding_mask [B, N]``, or none for a pad query."""
    if rows.is_floating_point() and not (is_zero_one(rows) | ((rows == 0) | (rows <= ADDITIVE_MASKED)).all()):
        raise ValueError(
            "A float 4-D attention_mask must be 0/1 (1 at real tokens) or additive (0 at real tokens, at most "
            f"{ADDITIVE_MASKED:g} at pads, e.g. the dtype's minimum); this one holds other values, an attention "
            f"bias that the efficient mechanisms cannot apply: {PASS_2D}."
        )
    if rows.dtype != torch.bool and not rows.is_floating_point() and not ((rows == 0) | (rows == 1)).all():
        raise ValueError(f"An integer 4-D attention_mask must hold 0 (pad) and 1 (real token): {PASS_2D}.")
    rows_fit = (seen == padding_mask[:, None, :]).all(-1)  # [B, Q]
    if seen.shape[1] > 1:  # [B, 1, N, N]: a pad query's row may hide every key
        rows_fit |= ~seen.any(-1) & ~padding_mask
    if not rows_fit.all():
        raise ValueError(
            "This 4-D attention_mask hides different keys from different queries (a causal or custom mask); the "
            f"efficient mechanisms can only hide the same pads from every query: {PASS_2D}."
        )


def masked_fill_min(logits: torch.Tensor, keep: torch.Tensor | None) -> torch.Tensor:
    """``logits`` at the dtype's lowest value where ``keep`` (broadcastable) is False: finite, so that an all-pad
    row softmaxes to uniform weights, not NaN."""
    if keep is None:
        return logits
    return logits.masked_fill(~keep, torch.finfo(logits.dtype).min)


def masked_softmax(logits: torch.Tensor, keep: torch.Tensor | None, dim: int) -> torch.Tensor:
    """Softmax over ``dim``, zero weight where ``keep`` is False."""
    return torch.softmax(masked_fill_min(logits, keep), dim=dim)


def zero_pads(x: torch.Tensor, padding_mask: torch.Tensor | None, token_dim: int = 1) -> torch.Tensor:
    """``x`` (batch first, tokens along ``token_dim``) zeroed at pads."""
    if padding_mask is None:
        return x
    shape = [1] * x.dim()
    shape[0], shape[token_dim] = padding_mask.shape
    return x * padding_mask.view(shape).to(x.dtype)


def real_lengths(padding_mask: torch.Tensor | None, batch: int, length: int, device) -> torch.Tensor:
    """``[B]`` real tokens per sequence."""
    if padding_mask is None:
        return torch.full((batch,), length, dtype=torch.long, device=device)
    return padding_mask.sum(-1)


def token_ranks(padding_mask: torch.Tensor | None, batch: int, length: int, device) -> torch.Tensor:
    """``[B, N]`` rank of each token among its sequence's real tokens, from 0; a pad gets the next real token's
    (at most the last)."""
    if padding_mask is None:
        return torch.arange(length, device=device).expand(batch, length)
    ranks = padding_mask.long().cumsum(-1) - padding_mask.long()
    return ranks.clamp(max=length - 1)


def gather_tokens(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``x [B, h, N, F]`` with its tokens in the order ``index [B, N]``."""
    return torch.gather(x, 2, index[:, None, :, None].expand_as(x))


def real_positions(padding_mask: torch.Tensor | None, batch: int, length: int, device) -> torch.Tensor:
    """``[B, N]`` position of the t-th real token at index t (0 past the real length): :func:`token_ranks`
    inverted."""
    positions = torch.arange(length, device=device).expand(batch, length)
    if padding_mask is None:
        return positions
    # Pads go to a spare column N, dropped after: a scatter, since ONNX has no stable sort.
    target = torch.where(padding_mask, token_ranks(padding_mask, batch, length, device), length)
    spare = torch.zeros(batch, length + 1, dtype=positions.dtype, device=device)
    return spare.scatter(1, target, positions)[:, :length]


def at_least_float32(x: torch.Tensor) -> torch.Tensor:
    """``x`` in float32, or in its own dtype when wider."""
    return x.to(torch.promote_types(x.dtype, torch.float32))


class RankOrder:
    """Moves ``[B, h, N, F]`` tensors between token positions and rank order, each sequence's real tokens first;
    without a padding mask nothing moves."""

    def __init__(self, padding_mask: torch.Tensor | None, batch: int, length: int, device):
        self.lengths = real_lengths(padding_mask, batch, length, device)  # [B]
        self.padding_mask = padding_mask
        if padding_mask is not None:
            self.positions = real_positions(padding_mask, batch, length, device)  # [B, N]: the position of rank t
            self.ranks = token_ranks(padding_mask, batch, length, device)  # [B, N]: the rank at position i

    def to_ranks(self, x: torch.Tensor) -> torch.Tensor:
        """``x [B, h, N, F]`` in rank order; slots past the real tokens hold copies, not zeros."""
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
        """Each position's rank among its sequence's real tokens: ``[B, N]``, or ``[1, N]`` without padding."""
        return torch.arange(length, device=device)[None] if self.padding_mask is None else self.ranks
