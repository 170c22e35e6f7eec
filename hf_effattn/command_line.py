"""What the command-line tools (``hf-effattn`` and the ``finetune/`` scripts) share: ``argparse`` types for
counts, a parser whose option errors are one line, and the report of a user error as one line and exit status 2.

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


class OneLineParser(argparse.ArgumentParser):
    """An ``argparse`` parser whose errors (a bad or missing option) are one line, as the user errors of
    :func:`user_errors_reported` are, naming ``--help`` instead of printing the whole usage; exit status 2."""

    def error(self, message: str):
        self.exit(USAGE_STATUS, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


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


def with_window_settings(attention_config: dict | None, local_window: int | None,
                         global_tokens: int | None) -> dict | None:
    """``--attention_config`` with ``--local_window`` and ``--global_tokens`` merged in (None when none is given);
    a window setting given in both places with two values raises."""
    settings = dict(attention_config or {})
    for name, value in {"local_window": local_window, "global_tokens": global_tokens}.items():
        if value is None:
            continue
        if settings.get(name, value) != value:
            raise ValueError(f"--{name} {value} contradicts {name}={settings[name]!r} in --attention_config: give it "
                             "once.")
        settings[name] = value
    return settings or None


def add_window_arguments(group) -> None:
    """``--local_window`` and ``--global_tokens``, merged into the attention settings by
    :func:`with_window_settings`."""
    group.add_argument("--local_window", type=positive_int, default=None, metavar="W",
                       help="Exact softmax over the tokens at most W // 2 positions away, beside the mechanism (a "
                            "setting of every mechanism but softmax's; default: none, the mechanism as published).")
    group.add_argument("--global_tokens", type=positive_int, default=None, metavar="G",
                       help="With --local_window: the first G tokens ([CLS]) attend to, and are attended by, every "
                            "token exactly.")


percentage = open_interval(0, 100, "a percentage")
probability = open_interval(0, 1, "a probability")
