"""The ``hf-effattn`` command: ``list``, ``convert``, ``bench``, ``train-task``, ``demo``.

Each subcommand lives in the module of :mod:`hf_effattn.commands` named after it (``train-task`` in
``train_task.py``), which provides ``add_arguments(parser)`` and ``run(args)``. Those modules import their heavy
dependencies (PyTorch, Transformers, datasets, matplotlib) inside ``run``, and their parsers take the names they offer
(the mechanisms', the heads') and their defaults from :mod:`hf_effattn.options.parser_values`, so that building a
parser stays fast; only the subcommand named on the command line is imported. ``hf-effattn --help``, ``--version``,
an unknown command, a subcommand's ``--help`` and a bad option of it answer without importing PyTorch or
Transformers. A user error (:mod:`hf_effattn.options.user_errors`) prints one line and exits with status 2;
``--debug`` shows its traceback instead.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Iterable
from importlib.metadata import version

from ..options.user_errors import OneLineParser, user_errors_reported
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


COMMAND_OPTIONS = ("-h", "--help", "--version", "--debug")  # the options of hf-effattn itself, before a subcommand


def build_parser(with_options: Iterable[str] = tuple(SUBCOMMANDS)) -> argparse.ArgumentParser:
    """The command's parser: every subcommand, with the options of those named in ``with_options`` (default: all;
    :func:`main` passes the one on the command line, so that only its module is imported)."""
    parser = OneLineParser(prog="hf-effattn", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=version_line())
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error, not only its message")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, help_text in SUBCOMMANDS.items():
        sub = commands.add_parser(name, help=help_text, description=help_text)
        sub.set_defaults(module=subcommand_module(name))
        if name in with_options:
            importlib.import_module(subcommand_module(name)).add_arguments(sub)
    return parser


def named_subcommand(argv: list[str]) -> list[str]:
    """The subcommand that ``argv`` names (its first argument that is not an option: the command's own options,
    :data:`COMMAND_OPTIONS`, take no value), as a list of one; an empty list for none, an unknown one, or an unknown
    option before it (the parser refuses them without the subcommand's options)."""
    for argument in argv:
        if not argument.startswith("-"):
            return [argument] if argument in SUBCOMMANDS else []
        if argument not in COMMAND_OPTIONS:
            return []
    return []


def version_line() -> str:
    """``hf-effattn X (transformers Y, torch Z)``: what a bug report needs, read from the installed packages'
    metadata (importing them would take seconds)."""
    return f"%(prog)s {__version__} (transformers {version('transformers')}, torch {version('torch')})"


def main(argv: list[str] | None = None) -> int:
    """Run the subcommand; its status (0), or exit with status 2 on a bad option or a user error."""
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(named_subcommand(argv)).parse_args(argv)
    with user_errors_reported(f"hf-effattn {args.command}", debug=args.debug):
        return importlib.import_module(args.module).run(args) or 0


if __name__ == "__main__":
    sys.exit(main())
