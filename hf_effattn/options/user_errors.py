"""How the command-line tools (``hf-effattn`` and the ``finetune/`` scripts) report a user's error: a parser whose
option errors are one line, and the report of a user error as one line and exit status 2 (their ``argparse`` types
are :mod:`hf_effattn.options.argument_types`).

A *user error* is an exception of a type in :data:`USER_ERRORS`: the ``ValueError`` / ``TypeError`` that
the package (and Transformers, datasets, huggingface_hub) raise for bad input (a training run that diverges,
:class:`TrainingDiverged`, among them), and the ``OSError`` family (a missing file or folder, an unknown Hub id, no
network). Anything else (``RuntimeError``, ``KeyError``,
``ZeroDivisionError``, ...) is a bug and keeps its traceback. ``hf-effattn --debug`` or the environment
variable ``HF_EFFATTN_DEBUG=1`` shows the traceback of user errors too.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path

USER_ERRORS = (ValueError, TypeError, OSError)
DEBUG_VARIABLE = "HF_EFFATTN_DEBUG"
USAGE_STATUS = 2  # as argparse exits on a bad option


class TrainingDiverged(ValueError, FloatingPointError):
    """A training run whose loss or weights stopped being finite numbers, stopped at that step: the learning rate (or
    the data) is the user's to change, so it is a user error (a ``ValueError``); also a ``FloatingPointError``, as such
    a stop was raised before."""


def debugging() -> bool:
    """Whether ``HF_EFFATTN_DEBUG`` asks for tracebacks (set, and not ``0``/``false``/empty)."""
    return os.environ.get(DEBUG_VARIABLE, "").lower() not in ("", "0", "false", "no")


def one_line(error: BaseException) -> str:
    """The error's message on one line (Transformers' and datasets' messages span several)."""
    return " ".join(str(error).split()) or type(error).__name__


def command_name() -> str:
    """How the running command is typed: ``python -m hf_effattn.finetuning.masked_lm`` for a module of this package
    run with ``-m`` (also under ``accelerate launch -m``), else the script's file name (``run_mlm.py``)."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if spec is not None and spec.name.startswith("hf_effattn."):
        return f"python -m {spec.name}"
    return Path(sys.argv[0]).name


@contextlib.contextmanager
def user_errors_reported(prog: str | None = None, debug: bool = False):
    """Inside the block, a user error (:data:`USER_ERRORS`) prints ``PROG: error: MESSAGE`` on stderr and
    exits with status 2, as ``argparse`` does for a bad option; with ``debug`` or ``HF_EFFATTN_DEBUG`` it
    propagates with its traceback. ``prog`` defaults to the command's name (:func:`command_name`)."""
    try:
        yield
    except USER_ERRORS as error:
        if debug or debugging():
            raise
        print(f"{prog or command_name()}: error: {one_line(error)}", file=sys.stderr)
        raise SystemExit(USAGE_STATUS) from None


class OneLineParser(argparse.ArgumentParser):
    """An ``argparse`` parser whose errors (a bad or missing option) are one line, as the user errors of
    :func:`user_errors_reported` are, naming ``--help`` instead of printing the whole usage; exit status 2. Its
    ``prog`` defaults to the command's name (:func:`command_name`)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("prog", command_name())
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        self.exit(USAGE_STATUS, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def refuse_options_without(given: list[str], purpose: str, needed: str) -> None:
    """Raise the ``ValueError`` of options ``given`` that act only on ``purpose``, which the ``needed`` option (not
    given) would run: they would do nothing."""
    raise ValueError(f"The option(s) {', '.join(given)} act only on {purpose}: add {needed}, or drop them.")


def run_script(main) -> None:
    """The ``if __name__ == "__main__"`` of a ``finetune/`` script or of the package module it runs (``python -m``):
    ``main()`` with user errors reported."""
    with user_errors_reported():
        main()
