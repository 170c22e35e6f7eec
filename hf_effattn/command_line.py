"""Deprecated: :mod:`hf_effattn.user_errors` (one-line user errors, ``run_script``),
:mod:`hf_effattn.argument_types` (the ``argparse`` types) and :mod:`hf_effattn.window_options` (``--local_window``,
``--global_tokens``) replace this module."""

from .argument_types import (  # noqa: F401
    bounded_int, non_negative_int, open_interval, percentage, positive_int, probability,
)
from .deprecation import warn_moved
from .user_errors import (  # noqa: F401
    DEBUG_VARIABLE, USAGE_STATUS, USER_ERRORS, OneLineParser, debugging, one_line, run_script, user_errors_reported,
)
from .window_options import add_window_arguments, with_window_settings  # noqa: F401

warn_moved("hf_effattn.command_line", "hf_effattn.user_errors, hf_effattn.argument_types and hf_effattn.window_options")
