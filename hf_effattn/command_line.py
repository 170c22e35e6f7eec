"""What the command-line tools (``hf-effattn`` and the ``finetune/`` scripts) share: ``argparse`` types for
counts, and the report of a user error as one line and exit status 2.

A *user error* is an exception of a type in :data:`USER_ERRORS`: the ``ValueError`` / ``TypeError`` that
the package (and Transformers, datasets, huggingface_hub) raise for bad input, and the ``OSError`` family
(a missing file or folder, an unknown Hub id, no network). Anything else (``RuntimeError``, ``KeyError``,
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


def debugging() -> bool:
    """Whether ``HF_EFFATTN_DEBUG`` asks for tracebacks (set, and not ``0``/``false``/empty)."""
    return os.environ.get(DEBUG_VARIABLE, "").lower() not in ("", "0", "false", "no")


def one_line(error: BaseException) -> str:
    """The error's message on one line (Transformers' and datasets' messages span several)."""
    return " ".join(str(error).split()) or type(error).__name__


@contextlib.contextmanager
def user_errors_reported(prog: str | None = None, debug: bool = False):
    """Inside the block, a user error (:data:`USER_ERRORS`) prints ``PROG: error: MESSAGE`` on stderr and
    exits with status 2, as ``argparse`` does for a bad option; with ``debug`` or ``HF_EFFATTN_DEBUG`` it
    propagates with its traceback. ``prog`` defaults to the script's name."""
    try:
        yield
    except USER_ERRORS as error:
        if debug or debugging():
            raise
        print(f"{prog or Path(sys.argv[0]).name}: error: {one_line(error)}", file=sys.stderr)
        raise SystemExit(USAGE_STATUS) from None


def run_script(main) -> None:
    """The ``if __name__ == "__main__"`` of a ``finetune/`` script: ``main()`` with user errors reported."""
    with user_errors_reported():
        main()


def bounded_int(minimum: int):
    """An ``argparse`` type: an integer of at least ``minimum``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < minimum:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {text!r}")
        return value

    return parse


positive_int = bounded_int(1)
non_negative_int = bounded_int(0)


def open_interval(low: float, high: float, what: str):
    """An ``argparse`` type: a number strictly between ``low`` and ``high``, named ``what`` in its error."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = None
        if value is None or not low < value < high:
            raise argparse.ArgumentTypeError(f"expected {what} between {low:g} and {high:g} (exclusive), got {text!r}")
        return value

    return parse


percentage = open_interval(0, 100, "a percentage")
probability = open_interval(0, 1, "a probability")
