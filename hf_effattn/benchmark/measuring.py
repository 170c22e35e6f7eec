"""Measuring: the wall time of one call and its peak memory (on CUDA ``torch.cuda.max_memory_allocated``, on CPU the
allocator events of ``torch.profiler``), and :func:`measure_round_robin`, which times several subjects in turns."""

from __future__ import annotations

import contextlib
import os
import statistics
import sys
import time
from typing import Callable

import torch

from .rows import Infeasible
from .subjects import Subject, make_step

MIB = 2**20
CPU_MEMORY_METHOD = "torch.profiler CPU allocator events (peak of live bytes above the start)"
CUDA_MEMORY_METHOD = "torch.cuda.max_memory_allocated after reset_peak_memory_stats (above the start)"


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed_seconds(step: Callable[[], None], device: torch.device) -> float:
    synchronize(device)
    start = time.perf_counter()
    step()
    synchronize(device)
    return time.perf_counter() - start


def cpu_peak_bytes(step: Callable[[], None]) -> int:
    """Peak of the bytes live in PyTorch's CPU allocator during ``step``, above those live at its start.

    ``torch.profiler`` with ``profile_memory=True`` records every allocation (+bytes) and free (-bytes) as a
    ``[memory]`` event; the peak is the maximum of their running sum in time order.
    """
    with native_stderr_silenced(), torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True
    ) as profiler:
        step()
    events = [event for event in profiler.profiler.kineto_results.events() if event.name() == "[memory]"]
    live = peak = 0
    for event in sorted(events, key=lambda event: event.start_ns()):  # stable: ties keep their recorded order
        live += event.nbytes()
        peak = max(peak, live)
    return peak


@contextlib.contextmanager
def native_stderr_silenced():
    """Send file descriptor 2 to ``/dev/null`` for the block: the profiler (Kineto) writes its ``USDT ...
    profiler_start`` / ``profiler_stop`` lines there from C++, past ``sys.stderr`` and every log level."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def cuda_peak_bytes(step: Callable[[], None], device: torch.device) -> int:
    """``torch.cuda.max_memory_allocated`` during ``step``, above the memory allocated at its start."""
    synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    start = torch.cuda.memory_allocated(device)
    step()
    synchronize(device)
    return torch.cuda.max_memory_allocated(device) - start


def peak_bytes(step: Callable[[], None], device: torch.device) -> int:
    return cuda_peak_bytes(step, device) if device.type == "cuda" else cpu_peak_bytes(step)


def memory_method(device: torch.device) -> str:
    return CUDA_MEMORY_METHOD if device.type == "cuda" else CPU_MEMORY_METHOD


def is_out_of_memory(error: Exception) -> bool:
    message = str(error).lower()
    return isinstance(error, torch.OutOfMemoryError) or "out of memory" in message or "can't allocate" in message


def infeasible(error: Exception) -> Infeasible:
    return Infeasible("out of memory" if is_out_of_memory(error) else f"failed: {str(error).splitlines()[0][:120]}")


def measure_round_robin(subjects: dict[str, Subject], args) -> dict[str, dict[str, float] | Infeasible]:
    """Times (ms, median of ``args.repeats`` after ``args.warmup``) and peaks (MiB) of each mode of every subject
    (``args.modes()``), and a compiled subject's compilation (s): its first call in each mode, before the turns.

    The calls take turns, one call of each subject per round, so that a slower or busier stretch of the machine
    falls on all of them alike and their ratios hold. A subject that fails (out of memory, an error) leaves the
    turns and is answered with :class:`Infeasible`."""
    device = torch.device(args.device)
    results: dict[str, dict[str, float] | Infeasible] = {name: {} for name in subjects}

    def timed(name: str, step: Callable[[], None]) -> float | None:
        """The seconds of one call of ``step``, None (the subject answered with Infeasible) where it fails."""
        try:
            return timed_seconds(step, device)
        except (RuntimeError, ValueError) as error:
            results[name] = infeasible(error)
            return None

    for mode in args.modes():
        steps = {name: make_step(subject, mode) for name, subject in subjects.items()
                 if not isinstance(results[name], Infeasible)}
        for name, step in steps.items():
            if subjects[name].compiled:
                seconds = timed(name, step)
                if seconds is not None:
                    results[name]["compile_s"] = results[name].get("compile_s", 0.0) + seconds
        times: dict[str, list[float]] = {name: [] for name in steps}
        for turn in range(args.warmup + args.repeats):
            for name, step in steps.items():
                if isinstance(results[name], Infeasible):
                    continue
                seconds = timed(name, step)
                if seconds is not None and turn >= args.warmup:
                    times[name].append(seconds)
        for name, step in steps.items():
            if isinstance(results[name], Infeasible):
                continue
            try:
                results[name].update({f"{mode}_ms": 1e3 * statistics.median(times[name]),
                                      f"{mode}_peak_mib": peak_bytes(step, device) / MIB})
            except (RuntimeError, ValueError) as error:
                results[name] = infeasible(error)
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return results
