"""Comparisons of float64 results that hold on any machine: the tolerance is relative to the values' size, since the
rounding of a sum scales with its terms, and each CPU's kernels add them in their own order."""

from __future__ import annotations

import torch

FLOAT64 = 1e-10  # float64 rounds at 1.1e-16; the fast paths and the references take other routes to one result


def assert_float64_close(actual: torch.Tensor, expected: torch.Tensor, precision: float = FLOAT64) -> None:
    """``actual`` equals ``expected`` up to rounding: each element within ``precision`` times its own size, or
    ``precision`` times the largest size in ``expected`` (at least 1); ``precision=0`` asks for equality."""
    scale = max(1.0, expected.abs().max().item()) if expected.numel() else 1.0
    torch.testing.assert_close(actual, expected, rtol=precision, atol=precision * scale)
