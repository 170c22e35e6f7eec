"""Padding helpers shared by the mechanisms, and the padding mask read from a model's ``attention_mask``.

A padding mask is a boolean ``[B, N]`` tensor, True at real tokens. Real tokens need not be
contiguous: every helper here works from each token's rank among the real tokens of its sequence,
so right padding, left padding and holes all give the same result at real positions.

:func:`padding_mask_from` reads ``attention_mask`` as ``[B, N]`` (nonzero at real tokens) or as Transformers'
broadcast ``[B, 1, 1, N]`` / ``[B, 1, N, N]``: bool, 0/1, or additive (0 at real tokens, at most ``ADDITIVE_MASKED``
at pads: the dtype's minimum, or -10000 in older code). A float mask is 0/1 if all its values are 0 or 1 and one is
1 (all zeros is an additive mask without pads), else additive; a ``where`` tells them apart, so that the reading
compiles and exports. A 4-D mask that hides different keys from different queries (causal, a bias) raises
``ValueError``: the efficient mechanisms can only hide the same pads from every query (a pad query's row may hide
every key).

In eager mode a mask without pads becomes None, so that the unpadded paths run (as Transformers' sdpa path drops an
all-ones mask), and a 4-D mask's values are checked. Neither happens under ``torch.compile``, ``torch.export`` or
tracing (:func:`capturing_graph`), where a branch on tensor values breaks the graph. Under ``torch.export`` or
tracing (:func:`exporting_graph`) one graph serves every shape, so that a branch on a shape, or on a size of 1, would
bake the traced one in.

Masked logits are filled with the dtype's lowest value, not ``-inf``: an all-pad row then softmaxes to uniform
weights, not NaN. :func:`real_positions` inverts :func:`token_ranks` with a scatter into a spare column, since ONNX
has no stable sort. A pad's rank is the next real token's (clamped to N - 1); :func:`real_positions` holds 0 past the
real tokens, and :meth:`RankOrder.to_ranks` puts the real tokens first, copies of them (not zeros) after. "Compiling"
means ``torch.compile``, "exporting" ``torch.export``.
"""

from __future__ import annotations

import torch

# additive entries <= this hide their key
ADDITIVE_MASKED = -1000.0
PASS_2D = "pass the [B, N] padding mask instead (1 at real tokens, 0 at pads)"


def padding_mask_from(attention_mask: torch.Tensor | None, batch: int, length: int) -> torch.Tensor | None:
    """``[B, N]`` bool padding mask of a 2-D or 4-D ``attention_mask``, or None."""
    if attention_mask is None:
        return None
    shape = tuple(attention_mask.shape)
    if shape == (batch, length):
        return without_padding_as_none(attention_mask.bool())
    if len(shape) == 4 and shape[:2] == (batch, 1) and shape[2] in (1, length) and shape[3] == length:
        return without_padding_as_none(padding_mask_from_4d(attention_mask))
    raise ValueError(
        f"attention_mask of shape {list(shape)} does not fit an input of {batch} sequences of {length} tokens: "
        f"pass [B, N] = [{batch}, {length}] (1 at real tokens, 0 at pads) or its broadcast [{batch}, 1, 1, {length}] "
        f"or [{batch}, 1, {length}, {length}]."
    )


def padding_mask_from_4d(attention_mask: torch.Tensor) -> torch.Tensor:
    """``[B, N]``: keys seen by a query of a ``[B, 1, Q, N]`` mask."""
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
    """True while compiling, exporting or tracing."""
    return torch.compiler.is_compiling() or exporting_graph()


def exporting_graph() -> bool:
    """True while exporting or tracing."""
    return torch.compiler.is_exporting() or torch.jit.is_tracing()


def without_padding_as_none(padding_mask: torch.Tensor) -> torch.Tensor | None:
    """None if every token is real, in eager mode."""
    if capturing_graph() or not bool(padding_mask.all()):
        return padding_mask
    return None


def is_zero_one(values: torch.Tensor) -> torch.Tensor:
    """0-d bool: ``values`` are 0 or 1, one is 1."""
    return ((values == 0) | (values == 1)).all() & (values == 1).any()


def check_padding_broadcast(rows: torch.Tensor, seen: torch.Tensor, padding_mask: torch.Tensor) -> None:
    """Raise unless ``rows [B, Q, N]`` hide only ``padding_mask [B, N]``'s pads."""
    if rows.is_floating_point() and not (is_zero_one(rows) | ((rows == 0) | (rows <= ADDITIVE_MASKED)).all()):
        raise ValueError(
            "A float 4-D attention_mask must be 0/1 (1 at real tokens) or additive (0 at real tokens, at most "
            f"{ADDITIVE_MASKED:g} at pads); this one holds other values, an attention bias that the efficient "
            f"mechanisms cannot apply: {PASS_2D}."
        )
    if rows.dtype != torch.bool and not rows.is_floating_point() and not ((rows == 0) | (rows == 1)).all():
        raise ValueError(f"An integer 4-D attention_mask must hold 0 (pad) and 1 (real token): {PASS_2D}.")
    rows_fit = (seen == padding_mask[:, None, :]).all(-1)  # [B, Q]
    if seen.shape[1] > 1:  # a pad query's row may hide every key
        rows_fit |= ~seen.any(-1) & ~padding_mask
    if not rows_fit.all():
        raise ValueError(
            "This 4-D attention_mask hides different keys from different queries (a causal or custom mask), not "
            f"only pads: {PASS_2D}."
        )


def masked_fill_min(logits: torch.Tensor, keep: torch.Tensor | None) -> torch.Tensor:
    """``logits`` at the dtype's minimum where not ``keep``."""
    if keep is None:
        return logits
    return logits.masked_fill(~keep, torch.finfo(logits.dtype).min)


def masked_softmax(logits: torch.Tensor, keep: torch.Tensor | None, dim: int) -> torch.Tensor:
    """Softmax over ``dim``, zero where not ``keep``."""
    return torch.softmax(masked_fill_min(logits, keep), dim=dim)


def scaled_softmax(query: torch.Tensor, key: torch.Tensor, allowed: torch.Tensor | None) -> torch.Tensor:
    """``softmax(Q K^T / sqrt(d))`` ``[B, h, Q, K]`` over the ``allowed`` keys, in at least float32."""
    scores = query @ key.transpose(-1, -2) * query.shape[-1] ** -0.5
    return masked_softmax(at_least_float32(scores), allowed, dim=-1)


def zero_pads(x: torch.Tensor, padding_mask: torch.Tensor | None, token_dim: int = 1) -> torch.Tensor:
    """``x`` (tokens along ``token_dim``) zeroed at pads."""
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
    """``[B, N]``: each token's rank among real tokens."""
    if padding_mask is None:
        return torch.arange(length, device=device).expand(batch, length)
    ranks = padding_mask.long().cumsum(-1) - padding_mask.long()
    return ranks.clamp(max=length - 1)


def gather_tokens(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``x [B, h, N, F]`` reordered by ``index [B, N]``."""
    return torch.gather(x, 2, index[:, None, :, None].expand_as(x))


def real_positions(padding_mask: torch.Tensor | None, batch: int, length: int, device) -> torch.Tensor:
    """``[B, N]``: each rank's position."""
    positions = torch.arange(length, device=device).expand(batch, length)
    if padding_mask is None:
        return positions
    # a scatter (pads to spare column N): ONNX has no stable sort
    target = torch.where(padding_mask, token_ranks(padding_mask, batch, length, device), length)
    spare = torch.zeros(batch, length + 1, dtype=positions.dtype, device=device)
    return spare.scatter(1, target, positions)[:, :length]


def at_least_float32(x: torch.Tensor) -> torch.Tensor:
    """``x`` in float32 or its own wider dtype."""
    return x.to(torch.promote_types(x.dtype, torch.float32))


class RankOrder:
    """Moves ``[B, h, N, F]`` tensors between position and rank order."""

    def __init__(self, padding_mask: torch.Tensor | None, batch: int, length: int, device):
        self.lengths = real_lengths(padding_mask, batch, length, device)  # [B]
        self.padding_mask = padding_mask
        if padding_mask is not None:
            self.positions = real_positions(padding_mask, batch, length, device)  # [B, N]: rank -> position
            self.ranks = token_ranks(padding_mask, batch, length, device)  # [B, N]: position -> rank

    def to_ranks(self, x: torch.Tensor) -> torch.Tensor:
        """``x [B, h, N, F]`` in rank order."""
        return x if self.padding_mask is None else gather_tokens(x, self.positions)

    def to_positions(self, x: torch.Tensor) -> torch.Tensor:
        return x if self.padding_mask is None else gather_tokens(x, self.ranks)

    def ranks_at_positions(self, length: int, device) -> torch.Tensor:
        """``[B, N]`` ranks, or ``[1, N]`` unpadded."""
        return torch.arange(length, device=device)[None] if self.padding_mask is None else self.ranks
