#!/usr/bin/env python
"""Time the package's start-up against PyTorch's and Transformers' own: each command in a fresh Python process, one
thread, several rounds (the median), and the ratio and difference to ``python -c "import torch, transformers"``.

The targets: ``import hf_effattn`` after ``import torch, transformers`` at most 0.5 s more than they take alone; the
``hf-effattn`` command's ``--help``, ``--version`` and an argument error, a subcommand's too, under 1 s (they import
neither).

    python benchmarks/startup.py              # 5 rounds
    python benchmarks/startup.py --rounds 9
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

BASELINE = "import torch, transformers"
COMMAND = "import sys; from hf_effattn.commands.main import main; sys.exit(main())"  # as the hf-effattn script runs
CASES = {  # what is timed -> the arguments of a fresh ``python``
    BASELINE: ["-c", BASELINE],
    "import hf_effattn": ["-c", "import hf_effattn"],
    "import torch, transformers, hf_effattn": ["-c", "import torch, transformers, hf_effattn"],
    "the same, then AutoConfig and AutoModel": [
        "-c", "import torch, transformers, hf_effattn; from transformers import AutoConfig, AutoModel"],
    "hf-effattn --version": ["-c", COMMAND, "--version"],
    "hf-effattn --help": ["-c", COMMAND, "--help"],
    "hf-effattn frobnicate (an argument error)": ["-c", COMMAND, "frobnicate"],
    "hf-effattn convert --bad (a subcommand's argument error)": ["-c", COMMAND, "convert", "--bad"],
}
ONE_THREAD = {name: "1" for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                     "TOKENIZERS_PARALLELISM")}


def seconds(arguments: list[str]) -> float:
    """The wall-clock seconds of one fresh ``python ARGUMENTS`` (its output discarded)."""
    start = time.perf_counter()
    subprocess.run([sys.executable, *arguments], env={**os.environ, **ONE_THREAD}, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - start


def medians(rounds: int) -> dict[str, float]:
    """Each case's median over ``rounds`` rounds, the cases interleaved within a round (a load on the machine that
    comes and goes weighs on every case alike)."""
    times = {name: [] for name in CASES}
    for _ in range(rounds):
        for name, arguments in CASES.items():
            times[name].append(seconds(arguments))
    return {name: statistics.median(values) for name, values in times.items()}


def table(results: dict[str, float]) -> str:
    """A Markdown table: each case's median, its ratio to the baseline's and the difference."""
    base = results[BASELINE]
    rows = ["| Case | Median (s) | Ratio to baseline | Difference (s) |", "|---|---|---|---|"]
    rows += [f"| `{name}` | {value:.2f} | {value / base:.2f} | {value - base:+.2f} |" for name, value in results.items()]
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="fresh processes per case (default 5)")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, got {args.rounds}")
    seconds(CASES[BASELINE])  # a first run warms the file cache
    print(table(medians(args.rounds)))


if __name__ == "__main__":
    main()
