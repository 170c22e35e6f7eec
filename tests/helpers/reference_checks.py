"""Assertions that a mechanism's module gives its explicit reference's results (``helpers.references``) at the real
tokens of a padded batch, up to float64 rounding."""

from __future__ import annotations

import torch

from helpers.mechanisms import random_batch
from helpers.references import reference
from helpers.tolerances import assert_float64_close


def assert_real_close(actual: torch.Tensor, mask: torch.Tensor, expected: list[torch.Tensor]) -> None:
    """``actual [B, N, ...]`` at each sequence's real tokens (``mask [B, N]``) equals ``expected[b]`` up to rounding."""
    for b, target in enumerate(expected):
        assert_float64_close(actual[b][mask[b]], target)


def assert_matches_reference(attn, lengths: list[int], sides: list[str], length: int) -> None:
    """On a padded batch of ``lengths`` real tokens padded on ``sides`` to ``length``, ``attn``'s context and
    ``output_attentions`` matrix at the real tokens are its reference's."""
    x, mask = random_batch(lengths, sides, length)
    out = attn(x, mask, output_attentions=True)
    refs = reference(attn, x, mask)
    assert_real_close(out.context, mask, [r.context for r in refs])
    for b, ref in enumerate(refs):
        real = mask[b].nonzero().squeeze(-1)
        assert_float64_close(out.attentions[b][:, real][:, :, real], ref.attention.expand(attn.num_heads, -1, -1))
