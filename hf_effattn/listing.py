"""Deprecated: ``hf-effattn list`` is :mod:`hf_effattn.commands.list`."""

from .commands.list import attention_lines, matches, model_lines  # noqa: F401
from .deprecation import warn_moved

warn_moved("hf_effattn.listing", "hf_effattn.commands.list")
