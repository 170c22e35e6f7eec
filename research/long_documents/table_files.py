"""What the study's tables read and write. Each table's rows are built from the per-run results
(``results/<kind>/*.json``) where this machine holds them, and kept as a compact table, ``tables/<name>.jsonl`` (one
row a line), which a fresh clone reads instead: the per-run results are not committed. Each table is printed and
written as ``results/<name>.md``, with its plot where the per-run results are here."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import runs

TABLES = runs.HERE / "tables"


def measured_here() -> bool:
    """Whether this machine holds per-run results: then every table is built from them, not read back."""
    return any(runs.RESULTS.glob("*/*.json"))


def table_rows(name: str, build) -> list:
    """Table ``name``'s rows: ``build()`` where :func:`measured_here` (saved as ``tables/<name>.jsonl``), else the
    rows that file keeps (none where it was never built)."""
    path = TABLES / f"{name}.jsonl"
    if measured_here():
        rows = build()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
        return rows
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()] if path.exists() else []


def mean_and_error(values: list[float]) -> tuple[float, float]:
    """The mean and its standard error (0 for a single value)."""
    mean = statistics.fmean(values)
    return mean, (statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else 0.0)


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])


def figure_and_axes(size: tuple[float, float] = (7, 4)):
    """A new matplotlib figure of ``size`` inches (no display needed) and its axes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(figsize=size)


def save_figure(figure, axes, path: Path) -> None:
    if axes.get_legend_handles_labels()[0]:
        axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def publish(name: str, text: str, plot=None) -> None:
    """Write ``results/<name>.md`` and, with ``plot(path)`` where :func:`measured_here`, ``results/<name>.png``;
    print the table."""
    runs.RESULTS.mkdir(parents=True, exist_ok=True)
    (runs.RESULTS / f"{name}.md").write_text(text + "\n")
    if plot and measured_here():
        plot(runs.RESULTS / f"{name}.png")
    print(text + "\n")
