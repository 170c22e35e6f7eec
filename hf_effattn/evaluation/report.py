"""An evaluation's report: each measure's count and its value for the model and for the chunked reader, with their
difference (each with its standard error over documents, :mod:`.standard_error`), as a table and as JSON."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from .standard_error import Estimate, pooled

DIFFERENCE = "model_minus_chunks"
READERS = ("model", "chunks", DIFFERENCE)  # the columns of the table


@dataclass(frozen=True)
class Comparison:
    """One measure read both ways: ``count`` items (``counted``: masked tokens, passages) over the documents."""

    label: str
    counted: str
    count: int
    model: Estimate
    chunks: Estimate
    model_minus_chunks: Estimate


def compared(label: str, counted: str, model: list[torch.Tensor], chunks: list[torch.Tensor]) -> Comparison:
    """The comparison of per-item scores, one 1-D tensor a document for each reader (the same items, in order)."""
    counts = [len(scores) for scores in model]
    totals = lambda each: [float(scores.sum()) for scores in each]  # noqa: E731
    return Comparison(label, counted, sum(counts), pooled(totals(model), counts), pooled(totals(chunks), counts),
                      pooled(totals([mine - theirs for mine, theirs in zip(model, chunks)]), counts))


@dataclass(frozen=True)
class EvaluationReport:
    """The settings an evaluation ran with (model, documents, lengths, seed) and its comparisons, by name
    (``masked_lm_loss``, ``long_context_loss``, ``retrieval_recall_at_1``)."""

    settings: dict
    measures: dict[str, Comparison]

    def as_dict(self) -> dict:
        """The report as JSON-ready data (an undefined value or error as ``None``)."""
        return {"settings": self.settings,
                "measures": {name: without_nan(asdict(measure)) for name, measure in self.measures.items()}}

    def table(self) -> str:
        """The report as a plain-text table, one row a measure."""
        header = ["measure", "count", "model", f"chunks of {self.settings['chunk_length']}", "model - chunks"]
        rows = [[measure.label, f"{measure.count:,} {measure.counted}",
                 *(getattr(measure, reader).format(3, signed=reader == DIFFERENCE) for reader in READERS)]
                for measure in self.measures.values()]
        widths = [max(len(row[column]) for row in [header, *rows]) for column in range(len(header))]
        lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in [header, *rows]]
        return "\n".join([self.title(), *lines])

    def title(self) -> str:
        settings = self.settings
        return (f"{settings['model']} on {settings['documents']} documents, each read up to {settings['max_length']:,}"
                f" tokens (± one standard error over documents)")

    def write_json(self, path: str | Path) -> None:
        """Write :meth:`as_dict` to a new file ``path``: a ``FileExistsError`` where it exists (it is kept)."""
        with open(path, "x", encoding="utf-8") as file:
            file.write(json.dumps(self.as_dict(), indent=2) + "\n")


def without_nan(data):
    """``data`` (nested dicts) with every NaN as ``None``, which JSON can hold."""
    if isinstance(data, dict):
        return {key: without_nan(value) for key, value in data.items()}
    return None if isinstance(data, float) and math.isnan(data) else data
