"""A measure over documents and its uncertainty: a total and a count per document (the summed loss of its masked
tokens and their number; a passage's hit, 0 or 1, and 1), pooled as ``sum(totals) / sum(counts)``, with the standard
error over documents: the documents are the sampled units, so the error is the ratio estimator's,
``sqrt(D / (D - 1) * sum_d (t_d - r n_d)^2) / sum_d n_d`` over the ``D`` documents (with one count each, the usual
standard error of a mean)."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Estimate:
    """A pooled value and its standard error over documents (NaN where it has no meaning: nothing counted, or one
    document)."""

    value: float
    standard_error: float

    def format(self, digits: int, signed: bool = False) -> str:
        """``value ± standard_error``, each with ``digits`` decimals, the value with its sign where ``signed`` (a
        difference); ``-`` for nothing counted."""
        if math.isnan(self.value):
            return "-"
        error = "" if math.isnan(self.standard_error) else f" ± {self.standard_error:.{digits}f}"
        return f"{self.value:{'+' if signed else ''}.{digits}f}{error}"


def pooled(totals: list[float], counts: list[int]) -> Estimate:
    """``sum(totals) / sum(counts)`` and its standard error over the documents (see the module docstring)."""
    counted, documents = sum(counts), len(counts)
    if counted == 0:
        return Estimate(math.nan, math.nan)
    ratio = sum(totals) / counted
    if documents < 2:
        return Estimate(ratio, math.nan)
    spread = sum((total - ratio * count) ** 2 for total, count in zip(totals, counts))
    return Estimate(ratio, math.sqrt(documents / (documents - 1) * spread) / counted)
