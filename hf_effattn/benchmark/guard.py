"""The guard: no length runs unpredicted. A length's time and peak memory are extrapolated from the shorter ones
measured (the first of a series from probes, single calls at 64, 128, ... tokens) and a length predicted past
``--time_limit`` or the memory limit (default: half the free memory) is refused before anything is built."""

from __future__ import annotations

import math
import os
from dataclasses import replace

import torch

from .measuring import MIB, infeasible, measure_round_robin
from .options import DTYPES
from .rows import Infeasible, Row, empty_row
from .subjects import Subject, build_subject

PROBE_LENGTH = 64  # a series' first length is approached by single calls at 64, 128, ... tokens below it


def extrapolate(points: list[tuple[int, float]], length: int) -> float:
    """``points`` ``(N, value)`` extended to ``length`` with the growth exponent of the last two, clamped to
    [1, 2] (quadratic when there is only one point)."""
    (n1, v1), (n2, v2) = ([points[0]] if len(points) == 1 else []) + points[-2:]
    exponent = 2.0 if n1 == n2 or v1 <= 0 or v2 <= 0 else min(2.0, max(1.0, math.log(v2 / v1) / math.log(n2 / n1)))
    return v2 * (length / n2) ** exponent


def size(mebibytes: float) -> str:
    """``1.5 GiB`` from a GiB on, else ``12.3 MiB``."""
    return f"{mebibytes / 1024:.1f} GiB" if mebibytes >= 1024 else f"{mebibytes:.1f} MiB"


def shape_floor_mib(length: int, args) -> float:
    """The memory a call at ``length`` needs whatever the mechanism: its input and its output, ``[B, N, C]`` each."""
    return 2 * args.batch_at(length) * length * args.hidden_size * DTYPES[args.dtype].itemsize / MIB


def check_feasible(rows: list[Row], length: int, args, memory_limit_mib: float) -> None:
    """Raise :class:`Infeasible` when the measured shorter ``rows`` predict too long a call or too large a peak."""
    floor_mib = shape_floor_mib(length, args)
    if floor_mib > memory_limit_mib:
        raise Infeasible(f"skipped: the input and output alone take {size(floor_mib)} > limit "
                         f"{size(memory_limit_mib)}")
    measured = [row for row in rows if row.fwd_bwd_ms is not None]
    if not measured:
        return
    seconds = extrapolate([(row.length, row.fwd_bwd_ms) for row in measured], length) / 1e3
    mebibytes = extrapolate([(row.length, row.fwd_bwd_peak_mib) for row in measured], length)
    if seconds > args.time_limit:
        raise Infeasible(f"skipped: predicted {seconds:.0f} s per call > --time_limit {args.time_limit:g} s")
    if mebibytes > memory_limit_mib:
        raise Infeasible(f"skipped: predicted peak {size(mebibytes)} > limit {size(memory_limit_mib)}")


def default_memory_limit_mib(device: torch.device) -> float:
    """Half the memory free now: on CUDA the device's, on CPU ``MemAvailable`` (or the total) of this machine."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0] / 2 / MIB
    try:
        with open("/proc/meminfo") as meminfo:
            available_kib = next(int(line.split()[1]) for line in meminfo if line.startswith("MemAvailable:"))
        return available_kib / 2 / 1024
    except (OSError, StopIteration):
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2 / MIB


def guarded_subject(mechanism: str, part: str, length: int, args, guide: list[Row],
                    memory_limit_mib: float) -> Subject:
    """The subject of ``mechanism``, ``part`` and ``length``, built only once the ``guide`` rows (shorter lengths)
    predict that it fits the limits (:func:`check_feasible`); raises :class:`Infeasible` otherwise."""
    check_feasible(guide, length, args, memory_limit_mib)
    return build_subject(mechanism, part, length, args)


def measure_alone(mechanism: str, part: str, length: int, args) -> dict[str, float]:
    """:func:`measure_round_robin` of one subject; raises :class:`Infeasible` when it cannot be built or run."""
    try:
        result = measure_round_robin({mechanism: build_subject(mechanism, part, length, args)}, args)[mechanism]
    except (RuntimeError, ValueError) as error:
        raise infeasible(error) from error
    if isinstance(result, Infeasible):
        raise result
    return result


def probe_rows(mechanism: str, part: str, length: int, args, memory_limit_mib: float) -> list[Row]:
    """Single calls (no warm-up) at ``PROBE_LENGTH``, twice that, ... below ``length``, each guarded by the ones
    before it: the points from which the first length of a series is predicted. Raises :class:`Infeasible` when
    a probe is predicted too slow or too large, or fails."""
    probes: list[Row] = []
    single_call = replace(args, warmup=0, repeats=1)
    probe = PROBE_LENGTH
    while probe < length:
        try:
            check_feasible(probes, probe, args, memory_limit_mib)
            probes.append(replace(empty_row(mechanism, part, probe, args),
                                  **measure_alone(mechanism, part, probe, single_call)))
        except Infeasible as reason:
            raise Infeasible(f"{reason} already at N={probe} (probed up from N={PROBE_LENGTH})") from reason
        probe *= 2
    return probes
