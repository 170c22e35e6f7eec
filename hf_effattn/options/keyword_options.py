"""A command-line tool's options given as Python keyword arguments, for the library entry of each training script
(``train(model_name_or_path="...", max_train_steps=2)`` beside ``main(argv)``): the keywords become the command
line that the script's own parser reads (:func:`keyword_argv`), so that every type, choice and check is the one
the command line has, and a bad option raises (:func:`errors_raised`) instead of ending the process.
"""

from __future__ import annotations

import argparse
import difflib
import json


def keyword_argv(parser: argparse.ArgumentParser, options: dict) -> list[str]:
    """The command line that gives ``parser`` the ``options``, each named as its option (``max_train_steps=2`` for
    ``--max_train_steps 2``): ``True`` / ``False`` for a flag, a list for an option of several values, a dict (JSON) or
    a path where the option takes one; ``None`` leaves the option at its default. ``TypeError`` names an unknown
    keyword and the closest options."""
    actions = {action.dest: action for action in parser._actions if action.option_strings}
    argv = []
    for name, value in options.items():
        if name not in actions:
            close = difflib.get_close_matches(name, list(actions), n=3)
            hint = f" Did you mean {', '.join(close)}?" if close else ""
            raise TypeError(f"Unknown option {name}={value!r}.{hint} The options are the command line's, without "
                            "their dashes (the script's --help lists them).")
        if value is None:
            continue
        action = actions[name]
        flag = action.option_strings[-1]
        if action.nargs == 0:  # store_true / store_false
            argv += [flag] if value != action.default else []
        else:
            values = value if isinstance(value, (list, tuple)) else [value]
            argv += [flag, *(option_text(item) for item in values)]
    return argv


def option_text(value) -> str:
    """A value as the command line writes it: a dict as JSON, anything else as its string."""
    return json.dumps(value) if isinstance(value, dict) else str(value)


def errors_raised(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """``parser``, whose errors (an unknown choice, a bad value, a missing option) raise ``ValueError`` with the
    command line's message, rather than printing it and ending the process; returned for chaining."""

    def error(message: str):
        raise ValueError(f"{message} (the script's --help lists the options)")

    parser.error = error
    return parser
