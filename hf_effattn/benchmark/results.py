"""The outputs: :func:`write_results` writes ``results.csv``, ``results.md`` and ``results.png`` and prints the
summaries."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from .options import BenchmarkSettings
from .plots import write_plot
from .rows import Row
from .summary import Summary, summarise
from .tables import write_csv, write_markdown


def write_results(rows: list[Row], output_dir: str | Path, verbose: bool = True, **settings) -> list[Summary]:
    """Write ``results.csv``, ``results.md`` and ``results.png`` (where matplotlib, the ``bench`` extra, is installed)
    of ``rows`` into ``output_dir``; returns (and with ``verbose`` prints) each mechanism's summary. ``settings``:
    those the rows were measured with (for the markdown's header and the fit)."""
    settings = BenchmarkSettings(**settings)
    summaries = summarise(rows, settings)
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    write_csv(rows, output_dir / "results.csv")
    write_markdown(rows, summaries, settings, output_dir / "results.md")
    plotted = importlib.util.find_spec("matplotlib") is not None
    if plotted:
        write_plot(rows, settings, output_dir / "results.png")
    if verbose:
        print("\n".join(summary.describe() for summary in summaries))
        plot = "results.png" if plotted else "no results.png: matplotlib is not installed (pip install " \
            "'hf_effattn[bench]')"
        print(f"Wrote {output_dir / 'results.csv'}, results.md and {plot}")
    return summaries
