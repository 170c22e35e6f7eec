"""``hf-effattn bench``: the command line (the options of :class:`~hf_effattn.benchmark.BenchmarkSettings` and
``--output_dir``), which runs :func:`~hf_effattn.benchmark.run_benchmark` and
:func:`~hf_effattn.benchmark.write_results` (the benchmark itself is :mod:`hf_effattn.benchmark`)."""

from __future__ import annotations

import argparse
import sys
from dataclasses import fields

from ..options.parser_values import BENCH_DEFAULTS, BENCH_DTYPES, BENCH_PARTS, BENCH_PEERS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The command line of ``hf-effattn bench``: the fields of :class:`~hf_effattn.benchmark.BenchmarkSettings`, with
    its defaults (:data:`~hf_effattn.options.parser_values.BENCH_DEFAULTS`), plus ``--output_dir``."""
    parser.add_argument("--attentions", nargs="+", default=None, metavar="NAME",
                        help="mechanisms to measure (default: all registered); the floor is always added")
    parser.add_argument("--local_window", type=int, default=None, metavar="W",
                        help="also time each mechanism beside an exact window of W tokens (as <name>+wW)")
    parser.add_argument("--local_block", type=int, default=None, metavar="S",
                        help="also time each mechanism beside aligned blocks of S tokens (as <name>+bS; local+bS is "
                             "the chunked reader)")
    parser.add_argument("--lengths", nargs="+", type=int, default=list(BENCH_DEFAULTS["lengths"]))
    parser.add_argument("--parts", nargs="+", choices=BENCH_PARTS, default=list(BENCH_DEFAULTS["parts"]))
    parser.add_argument("--batch_size", type=int, default=None, help="sequences a call (default 1)")
    parser.add_argument("--tokens_per_step", type=int, default=None, metavar="TOKENS",
                        help="instead of --batch_size: TOKENS // N sequences a call at each length N (at least 1), "
                             "as users train with a fixed number of tokens a step")
    for name in ("hidden_size", "num_heads", "warmup", "fit_points", "seed"):
        parser.add_argument(f"--{name}", type=int, default=BENCH_DEFAULTS[name])
    parser.add_argument("--intermediate_size", type=int, default=None, help="feed-forward width (default 4 x hidden)")
    parser.add_argument("--num_layers", type=int, default=BENCH_DEFAULTS["num_layers"],
                        help="layers of the whole encoder")
    parser.add_argument("--peers", nargs="*", choices=BENCH_PEERS, default=False, metavar="PEER",
                        help="also time Transformers' encoders as whole encoders (part encoder): all without "
                             f"names, or some of {', '.join(BENCH_PEERS)}")
    parser.add_argument("--compile", nargs="*", default=False, metavar="ROW",
                        help="also time rows compiled with torch.compile, in the same turns, as <row>@compiled (the "
                             "compilation timed apart): all without names, or some rows, e.g. kerformer "
                             "peer:roberta-chunks512")
    parser.add_argument("--fwd_bwd_only", action="store_true",
                        help="time forward and backward only, not the forward alone (half the calls, and half the "
                             "compilations)")
    parser.add_argument("--max_length", type=int, default=None,
                        help="build every model for this maximum length (default: each for the length it runs)")
    parser.add_argument("--device", default=None, help="default: cuda where there is one, else cpu")
    parser.add_argument("--dtype", choices=BENCH_DTYPES, default=BENCH_DEFAULTS["dtype"])
    parser.add_argument("--repeats", type=int, default=BENCH_DEFAULTS["repeats"],
                        help="timed calls; the median is reported")
    parser.add_argument("--time_limit", type=float, default=BENCH_DEFAULTS["time_limit"],
                        help="skip a length whose predicted forward+backward call takes longer (seconds)")
    parser.add_argument("--memory_limit_gb", type=float, default=None,
                        help="skip a length whose predicted peak is larger (default: half the free memory)")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    parser.add_argument("--output_dir", default="bench_results")


def settings_of(args: argparse.Namespace) -> dict:
    """The fields of :class:`~hf_effattn.benchmark.BenchmarkSettings` from the command line (``--peers``,
    ``--compile`` without names: all; ``--device`` not given: the settings' own default)."""
    from ..benchmark.options import BenchmarkSettings

    settings = {name: getattr(args, name) for name in (f.name for f in fields(BenchmarkSettings))}
    return {name: True if name in ("peers", "compile") and value == [] else value for name, value in settings.items()
            if name != "device" or value is not None}


def run(args: argparse.Namespace) -> int:
    """``hf-effattn bench``: :func:`~hf_effattn.benchmark.run_benchmark` and
    :func:`~hf_effattn.benchmark.write_results` with the command line's settings."""
    from ..benchmark.results import write_results
    from ..benchmark.runner import run_benchmark

    settings = settings_of(args)
    rows = run_benchmark(**settings)
    if all(row.fwd_bwd_ms is None for row in rows):
        print("hf-effattn bench: error: nothing was measured (the notes above say why); nothing written. Shorten "
              "--lengths or --batch_size, or raise --memory_limit_gb or --time_limit.", file=sys.stderr)
        return 1
    write_results(rows, args.output_dir, **settings)
    return 0
