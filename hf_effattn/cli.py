"""Deprecated: the ``hf-effattn`` command is :mod:`hf_effattn.commands.main`."""

import sys

from .commands.main import SUBCOMMANDS, build_parser, main, version_line  # noqa: F401
from .deprecation import warn_moved

warn_moved("hf_effattn.cli", "hf_effattn.commands.main")

if __name__ == "__main__":
    sys.exit(main())
