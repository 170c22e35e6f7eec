"""Padding helpers shared by the mechanisms, and the padding mask read from a model's ``attention_mask``.

A padding mask is a boolean ``[B, N]`` tensor, True at real tokens. Real tokens need not be
contiguous: every helper here works from each token's rank among the real tokens of its sequence,
so right padding, left padding and holes all give the same result at real positions.
"""

from __future__ import annotations

import torch

# An additive mask entry at or below this hides its key (Transformers writes the dtype's minimum, older code -10000).
ADDITIVE_MASKED = -1000.0
PASS_2D = "pass the [B, N] padding mask instead (1 at real tokens, 0 at pads)"


def padding_mask_from(attention_mask: torch.Tensor | None, batch: int, length: int) -> torch.Tensor | None:
    """The ``[B, N]`` bool padding mask from a model's ``attention_mask``, in any form that expresses padding:

    * ``[B, N]``, nonzero at real tokens (what tokenizers give);
    * ``[B, 1, 1, N]`` or ``[B, 1, N, N]``, the padding mask broadcast over the queries as Transformers prepares it
      (``get_extended_attention_mask``, ``create_bidirectional_mask``): bool (True = real), integer 0/1, or float,
      either 0/1 or additive (0 at real tokens, a large negative value at pads: at most -1000, e.g. the dtype's
      minimum or -inf). In the ``[B, 1, N, N]`` form the rows of pad queries may also be all hidden.

    Any other shape raises ``ValueError``, and so does a 4-D mask that is not a broadcast padding mask (a causal or
    per-query mask, an attention bias): the mechanisms can only hide the same keys from every query. The values of
    a 4-D mask are checked in eager mode; while compiling or exporting they are not (a check would break the graph).
    A mask without pads (all ones, as a tokenizer returns for sequences of one length) gives ``None`` in eager mode,
    so that the mechanisms take their unpadded paths (the same outputs, sooner).
    """
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
    """``[B, N]`` real tokens of a ``[B, 1, Q, N]`` mask (Q = 1 or N; see :func:`padding_mask_from`): the keys that
    some query sees. A float mask is read as 0/1 when all its values are 0 or 1 and one is 1, else as additive,
    without a branch on the values (a tensor-wide ``where``), so the conversion compiles and exports."""
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
    """Whether the code runs under ``torch.compile``, ``torch.export`` or tracing, where branching on a tensor's
    values would break the graph."""
    return torch.compiler.is_compiling() or exporting_graph()


def exporting_graph() -> bool:
    """Whether the code runs under ``torch.export`` (``torch.onnx.export``) or tracing: the graph must serve every
    input shape, so a branch on a shape (a sequence a whole number of blocks long), or a size of 1 (which
    ``torch.export`` fixes), would bake the traced one in. ``torch.compile`` guards both and compiles again."""
    return torch.compiler.is_exporting() or torch.jit.is_tracing()


def without_padding_as_none(padding_mask: torch.Tensor) -> torch.Tensor | None:
    """``None`` for a ``[B, N]`` padding mask in which every token is real, read in eager mode only (as Transformers'
    sdpa path drops an all-ones mask: one host sync per forward on an accelerator); a captured graph keeps the mask
    and never branches on its values."""
    if capturing_graph() or not bool(padding_mask.all()):
        return padding_mask
    return None


def is_zero_one(values: torch.Tensor) -> torch.Tensor:
    """A 0-d bool tensor: all ``values`` are 0 or 1, and one is 1 (an all-zero float mask is additive: no pads)."""
    return ((values == 0) | (values == 1)).all() & (values == 1).any()


def check_padding_broadcast(rows: torch.Tensor, seen: torch.Tensor, padding_mask: torch.Tensor) -> None:
    """Raise unless the 4-D mask's ``rows [B, Q, N]`` hold valid values and ``seen [B, Q, N]`` (the keys each query
    sees) is ``padding_mask [B, N]`` for every query, or nothing for a pad query."""
    if rows.is_floating_point() and not (is_zero_one(rows) | ((rows == 0) | (rows <= ADDITIVE_MASKED)).all()):
        raise ValueError(
            "A float 4-D attention_mask must be 0/1 (1 at real tokens) or additive (0 at real tokens, at most "
            f"{ADDITIVE_MASKED:g} at pads, e.g. the dtype's minimum); this one holds other values, an attention "
            f"bias that the efficient mechanisms cannot apply: {PASS_2D}."
        )
    if rows.dtype != torch.bool and not rows.is_floating_point() and not ((rows == 0) | (rows == 1)).all():
        raise ValueError(f"An integer 4-D attention_mask must hold 0 (pad) and 1 (real token): {PASS_2D}.")
    rows_fit = (seen == padding_mask[:, None, :]).all(-1)  # [B, Q]
    if seen.shape[1] > 1:  # [B, 1, N, N]: the row of a pad query may also hide every key
        rows_fit |= ~seen.any(-1) & ~padding_mask
    if not rows_fit.all():
        raise ValueError(
            "This 4-D attention_mask hides different keys from different queries (a causal or custom mask); the "
            f"efficient mechanisms can only hide the same pads from every query: {PASS_2D}."
        )


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


def gather_tokens(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``x [B, h, N, F]`` with its tokens taken in the order ``index [B, N]``, same shape."""
    return torch.gather(x, 2, index[:, None, :, None].expand_as(x))


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


def at_least_float32(x: torch.Tensor) -> torch.Tensor:
    """``x`` in float32, or in its own dtype when that is wider (float64 stays)."""
    return x.to(torch.promote_types(x.dtype, torch.float32))


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
