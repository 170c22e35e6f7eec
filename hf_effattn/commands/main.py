"""The ``hf-effattn`` command: ``list``, ``convert``, ``bench``, ``train-task``, ``demo``.

Each subcommand lives in the module of :mod:`hf_effattn.commands` named after it (``train-task`` in
``train_task.py``), which provides ``add_arguments(parser)`` and ``run(args)``. Those modules import their heavy
dependencies (datasets, accelerate, matplotlib) inside ``run`` so that building the parser stays fast. A user
error (:mod:`hf_effattn.user_errors`) prints one line and exits with status 2; ``--debug`` shows its traceback
instead.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from ..user_errors import OneLineParser, user_errors_reported
from ..version import __version__

SUBCOMMANDS = {  # name -> what it does; its module is hf_effattn.commands.<name, "-" as "_">
    "list": "List the registered attention mechanisms and model presets.",
    "convert": "Convert a RoBERTa/BERT/ViT checkpoint to an efficient-attention model.",
    "bench": "Time and measure memory of the mechanisms against SDPA.",
    "train-task": "Train on a synthetic long-range task (adding, ordering, ListOps).",
    "demo": "Offline demo: fine-tune a small encoder, save it Hub-ready, reload it.",
    "evaluate": "Evaluate a masked-LM model on your documents beside the chunked reader of its checkpoint.",
}


def subcommand_module(name: str) -> str:
    """The module of subcommand ``name``: ``hf_effattn.commands.train_task`` for ``train-task``."""
    return f"{__package__}.{name.replace('-', '_')}"


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="hf-effattn", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=version_line())
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error, not only its message")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, help_text in SUBCOMMANDS.items():
        sub = commands.add_parser(name, help=help_text, description=help_text)
        sub.set_defaults(module=subcommand_module(name))
        importlib.import_module(subcommand_module(name)).add_arguments(sub)
    return parser


def version_line() -> str:
    """``hf-effattn X (transformers Y, torch Z)``: what a bug report needs."""
    import torch
    import transformers

    return f"%(prog)s {__version__} (transformers {transformers.__version__}, torch {torch.__version__})"


def main(argv: list[str] | None = None) -> int:
    """Run the subcommand; its status (0), or exit with status 2 on a bad option or a user error."""
    args = build_parser().parse_args(argv)
    with user_errors_reported(f"hf-effattn {args.command}", debug=args.debug):
        return importlib.import_module(args.module).run(args) or 0


if __name__ == "__main__":
    sys.exit(main())
