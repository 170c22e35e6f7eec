"""Deprecated: the transfer's peak memory is :mod:`hf_effattn.conversion.transfer.peak_memory`."""

from ..deprecation import warn_moved
from .transfer.peak_memory import CUDA_METHOD, RSS_METHOD, RSS_SINCE_START_METHOD, PeakMemory, peak_memory  # noqa: F401

warn_moved("hf_effattn.conversion.peak_memory", "hf_effattn.conversion.transfer.peak_memory")
