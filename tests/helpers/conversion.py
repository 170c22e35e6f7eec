"""``hf-effattn convert`` run in-process on its own parser, so that a user error propagates to the test."""

from __future__ import annotations

import argparse

from hf_effattn.commands import convert as command


def run_convert(argv: list[str]) -> int:
    """``hf-effattn convert ARGV``'s status; its errors raise (no one-line report, no exit)."""
    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    return command.run(parser.parse_args(argv))
