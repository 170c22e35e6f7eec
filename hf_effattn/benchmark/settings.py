"""Deprecated: what ``hf-effattn bench`` measures is :mod:`hf_effattn.benchmark.options` (``settings`` is the
mechanisms' value specs, :mod:`hf_effattn.modeling.settings`)."""

from ..deprecation import warn_moved
from .options import AT_LEAST, BASELINE, DTYPES, FLOOR, MODES, PARTS, BenchmarkSettings, default_device  # noqa: F401

warn_moved("hf_effattn.benchmark.settings", "hf_effattn.benchmark.options")
