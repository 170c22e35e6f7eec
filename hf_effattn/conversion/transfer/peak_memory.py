"""The peak memory of a block of work, as the attention-transfer report gives it.

* CUDA: ``torch.cuda.max_memory_allocated`` after ``torch.cuda.reset_peak_memory_stats``: the most bytes of
  tensors PyTorch held on the device at once, the models included (not its allocator's cache, not other
  processes).
* CPU: the peak resident set size of the process (Linux ``VmHWM``, reset at the block's start by writing ``5``
  to ``/proc/self/clear_refs``): all the memory the process touched, Python, libraries and models included.
  Where it cannot be reset, the peak since the process started (``ru_maxrss``), and the method says so.

Either way the device's (or the process's) peak counter is reset when the block starts::

    with peak_memory(torch.device("cpu")) as peak:
        work()
    print(peak.bytes, peak.method)
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import torch

CUDA_METHOD = "torch.cuda.max_memory_allocated (tensors on the GPU, models included)"
RSS_METHOD = "peak resident set size of the process (VmHWM, reset at the start)"
RSS_SINCE_START_METHOD = "peak resident set size of the process since it started (ru_maxrss)"
STATUS_FILE = Path("/proc/self/status")
CLEAR_REFS_FILE = Path("/proc/self/clear_refs")
RESET_PEAK_RSS = "5"  # clear_refs: reset the peak RSS to the current RSS (Linux 4.0+)


@dataclass
class PeakMemory:
    """Filled in when the ``peak_memory`` block ends; ``None`` where the device has no measure."""

    bytes: int | None = None
    method: str | None = None


def reset_peak_rss() -> bool:
    """Reset the process's peak RSS to its current RSS; whether that was possible."""
    try:
        CLEAR_REFS_FILE.write_text(RESET_PEAK_RSS)
        return True
    except OSError:
        return False


def peak_rss_bytes() -> int | None:
    """The process's peak RSS: ``VmHWM`` where ``/proc`` has it, else ``ru_maxrss`` (None without either)."""
    try:
        for line in STATUS_FILE.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024  # kB
    except OSError:
        pass
    try:
        import resource
    except ImportError:  # Windows
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # bytes on macOS, KiB elsewhere


@contextmanager
def peak_memory(device: torch.device) -> Iterator[PeakMemory]:
    """The peak memory of the block's work on ``device`` (see the module docstring), filled in at its end."""
    peak = PeakMemory()
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        yield peak
        peak.bytes, peak.method = torch.cuda.max_memory_allocated(device), CUDA_METHOD
    elif device.type == "cpu":
        reset = reset_peak_rss()
        yield peak
        peak.bytes, peak.method = peak_rss_bytes(), RSS_METHOD if reset else RSS_SINCE_START_METHOD
    else:
        yield peak
