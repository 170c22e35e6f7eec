"""The machine the results were measured on, as the results' header and plot title name it."""

from __future__ import annotations

import os
import platform

import torch

from ..modeling.fast_paths import fast_path_mode


def machine_description(device: torch.device) -> str:
    if device.type == "cuda":
        return (f"{torch.cuda.get_device_name(device)} (torch {torch.__version__}, fast paths "
                f"{fast_path_mode()!r})")
    return f"{cpu_model()}, {os.cpu_count()} CPUs, {torch.get_num_threads()} torch threads (torch {torch.__version__})"


def load_average() -> str:
    """The 1-minute load average: other processes on the machine inflate wall times."""
    return f"1-minute load average {os.getloadavg()[0]:.1f}"


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            return next(line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()
