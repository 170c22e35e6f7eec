"""Deprecated: ``hf-effattn demo`` is :mod:`hf_effattn.commands.demo`."""

from .commands.demo import FULL, QUICK, DemoSize, add_arguments, run  # noqa: F401
from .deprecation import warn_moved

warn_moved("hf_effattn.demo", "hf_effattn.commands.demo")
