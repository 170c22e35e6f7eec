"""``hf-effattn bench``: time and peak memory of the mechanisms against SDPA, alone and in an encoder layer.

For every mechanism and length it measures, on batches of random inputs ``[B, N, C]``:

* ``part = attention``: the mechanism alone (its projections and token mixing, before the output projection);
* ``part = layer``: one full post-LN encoder layer (``EffAttnRobertaLayer``) built around it;

each in two modes: ``fwd`` (eval mode, no autograd) and ``fwd_bwd`` (train mode, forward and backward of the
output's mean plus the mechanism's auxiliary loss). Times are the median of ``--repeats`` calls after
``--warmup`` calls. Peak memory is the most memory held at once during one call, above what was held before
it: on CUDA ``torch.cuda.max_memory_allocated`` after a reset; on CPU the running sum of the allocations and
frees that PyTorch's CPU allocator reports to ``torch.profiler`` (``profile_memory=True``).

The ``floor`` is the same layer without token mixing (``context = V``, only the value projection): what every
mechanism must pay anyway. It is local to this module and not registered.

Each model is built for the length it runs (``max_length = N``, as the papers configure their models) unless
``--max_length`` fixes one for all. A length whose predicted time or memory (extrapolated from the shorter
lengths) exceeds ``--time_limit`` or ``--memory_limit_gb``, or that runs out of memory, is skipped with a
note, and so are the longer ones. No length runs unpredicted: the first one of a series is approached by
single unreported calls at 64, 128, ... tokens below it, each predicted from those before, and any length
whose input and output alone would pass the memory limit is refused from the shapes.

Writes ``results.csv``, ``results.md`` and ``results.png`` into ``--output_dir`` and prints, for each
mechanism, the length from which it beats ``sdpa`` and the log-log slope of its time over the longest lengths.

From Python, :func:`run_benchmark` takes the same settings as keyword arguments (see :class:`BenchmarkSettings`)
and returns the :class:`Row` s that the command prints, writes and plots; :func:`write_results` writes them::

    from hf_effattn.benchmark import run_benchmark, write_results
    rows = run_benchmark(attentions=["kerformer"], lengths=[256, 512], parts=["attention"], threads=1)
    slowest = max(rows, key=lambda row: row.fwd_bwd_ms or 0)
    write_results(rows, "bench_results")
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import math
import os
import platform
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Callable

import torch
from torch import nn

from .modeling.attentions import AttentionOutput, AttentionSettings, EfficientAttention, list_attentions

FLOOR = "floor"
BASELINE = "sdpa"
PARTS = ("attention", "layer")
MODES = ("fwd", "fwd_bwd")
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
CPU_MEMORY_METHOD = "torch.profiler CPU allocator events (peak of live bytes above the start)"
CUDA_MEMORY_METHOD = "torch.cuda.max_memory_allocated after reset_peak_memory_stats (above the start)"
MIB = 2**20


class FloorAttention(EfficientAttention):
    """No token mixing: ``context = V = value(X)``, ``[B, N, C] -> [B, N, C]``. Deliberately not registered."""

    name = FLOOR
    uses_query_key = False

    def forward(self, hidden_states, padding_mask=None, state=None, output_attentions=False) -> AttentionOutput:
        return AttentionOutput(self.value(hidden_states))


@dataclass
class Row:
    """One line of ``results.csv``: a mechanism, part and length; times in ms, peaks in MiB (None if skipped)."""

    mechanism: str
    part: str
    length: int
    batch_size: int
    hidden_size: int
    num_heads: int
    device: str
    dtype: str
    fwd_ms: float | None = None
    fwd_bwd_ms: float | None = None
    fwd_peak_mib: float | None = None
    fwd_bwd_peak_mib: float | None = None
    note: str = ""


COLUMNS = [f.name for f in fields(Row)]


def default_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


@dataclass
class BenchmarkSettings:
    """What :func:`run_benchmark` measures; the command line's options have the same names and defaults.

    ``attentions``: mechanisms (None: all registered; ``sdpa`` and the floor are always added). ``lengths``: the
    N to run. ``parts``: ``"attention"`` and/or ``"layer"``. ``intermediate_size`` None: 4 x hidden.
    ``max_length`` None: each model built for the length it runs. ``repeats``: timed calls (median reported)
    after ``warmup`` untimed ones. ``time_limit`` (s) and ``memory_limit_gb`` (None: half the free memory): skip
    a length predicted to exceed them. ``fit_points``: longest lengths of the growth exponent. ``threads``: torch
    CPU threads (None: torch's choice)."""

    attentions: list[str] | None = None
    lengths: list[int] = field(default_factory=lambda: [256, 512, 1024, 2048, 4096, 8192])
    parts: list[str] = field(default_factory=lambda: list(PARTS))
    batch_size: int = 1
    hidden_size: int = 768
    num_heads: int = 12
    intermediate_size: int | None = None
    max_length: int | None = None
    device: str = field(default_factory=default_device)
    dtype: str = "float32"
    repeats: int = 5
    warmup: int = 1
    time_limit: float = 60.0
    memory_limit_gb: float | None = None
    fit_points: int = 3
    threads: int | None = None
    seed: int = 0

    def check(self) -> None:
        """Raise ``ValueError`` naming a setting that cannot be run and how to fix it."""
        if not self.lengths or min(self.lengths) < 1:
            raise ValueError(f"lengths={self.lengths}: give one or more lengths of at least 1 (--lengths).")
        for name, minimum in AT_LEAST.items():
            value = getattr(self, name)
            if value is not None and value < minimum:
                raise ValueError(f"{name}={value}: it must be at least {minimum} (--{name}).")
        if self.hidden_size % self.num_heads:
            raise ValueError(f"hidden_size={self.hidden_size} is not a multiple of num_heads={self.num_heads}: "
                             "change one of them.")
        if self.time_limit <= 0 or (self.memory_limit_gb is not None and self.memory_limit_gb <= 0):
            raise ValueError(f"time_limit={self.time_limit:g} and memory_limit_gb={self.memory_limit_gb} must be "
                             "positive (leave --memory_limit_gb out for half the free memory).")
        unknown = sorted(set(self.attentions or []) - set(list_attentions()))
        if unknown:
            raise ValueError(f"Unknown attention(s) {', '.join(unknown)}: choose from {', '.join(list_attentions())}.")
        if not set(self.parts) <= set(PARTS) or self.dtype not in DTYPES:
            raise ValueError(f"parts={self.parts} dtype={self.dtype!r}: parts must be among {PARTS}, dtype one of "
                             f"{', '.join(DTYPES)}.")
        if self.max_length and self.max_length < max(self.lengths):
            raise ValueError(f"max_length={self.max_length} is shorter than the longest length {max(self.lengths)}: "
                             "raise it or leave it None.")


AT_LEAST = {"batch_size": 1, "hidden_size": 1, "num_heads": 1, "repeats": 1, "warmup": 0, "fit_points": 2,
            "intermediate_size": 1, "max_length": 1, "threads": 1}  # the settings' smallest values (None: unset)
PROBE_LENGTH = 64  # a series' first length is approached by single calls at 64, 128, ... tokens below it


class Infeasible(Exception):
    """A length that is not measured: predicted too slow or too large, out of memory, or failing."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The command line of ``hf-effattn bench``: the fields of :class:`BenchmarkSettings`, plus ``--output_dir``."""
    defaults = BenchmarkSettings()
    parser.add_argument("--attentions", nargs="+", default=None, metavar="NAME",
                        help="mechanisms to measure (default: all registered); the floor is always added")
    parser.add_argument("--lengths", nargs="+", type=int, default=defaults.lengths)
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=defaults.parts)
    for name in ("batch_size", "hidden_size", "num_heads", "warmup", "fit_points", "seed"):
        parser.add_argument(f"--{name}", type=int, default=getattr(defaults, name))
    parser.add_argument("--intermediate_size", type=int, default=None, help="feed-forward width (default 4 x hidden)")
    parser.add_argument("--max_length", type=int, default=None,
                        help="build every model for this maximum length (default: each for the length it runs)")
    parser.add_argument("--device", default=defaults.device)
    parser.add_argument("--dtype", choices=list(DTYPES), default=defaults.dtype)
    parser.add_argument("--repeats", type=int, default=defaults.repeats, help="timed calls; the median is reported")
    parser.add_argument("--time_limit", type=float, default=defaults.time_limit,
                        help="skip a length whose predicted forward+backward call takes longer (seconds)")
    parser.add_argument("--memory_limit_gb", type=float, default=None,
                        help="skip a length whose predicted peak is larger (default: half the free memory)")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    parser.add_argument("--output_dir", default="bench_results")


# --- building what is measured -------------------------------------------------------------------------------


def layer_config(mechanism: str, args, length: int):
    """An ``EffAttnRobertaConfig`` of one layer running ``mechanism`` (the floor starts from ``sdpa``), dropout off."""
    from .modeling.configuration_effattn import EffAttnRobertaConfig

    return EffAttnRobertaConfig(
        hidden_size=args.hidden_size,
        num_attention_heads=args.num_heads,
        intermediate_size=args.intermediate_size or 4 * args.hidden_size,
        num_hidden_layers=1,
        attention_type=BASELINE if mechanism == FLOOR else mechanism,
        max_position_embeddings=args.max_length or length,
        roberta_positions=False,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )


def build_module(mechanism: str, part: str, args, length: int) -> nn.Module:
    """The measured module: an ``EffAttnRobertaLayer`` or its mechanism, on ``args.device`` in ``args.dtype``."""
    from .modeling.encoder import EffAttnRobertaLayer

    torch.manual_seed(args.seed)
    layer = EffAttnRobertaLayer(layer_config(mechanism, args, length), layer_idx=0)
    if mechanism == FLOOR:
        layer.attention.self = FloorAttention(args.hidden_size, args.num_heads, AttentionSettings())
    module = layer if part == "layer" else layer.attention.self
    return module.to(device=args.device, dtype=DTYPES[args.dtype])


def output_loss(output) -> torch.Tensor:
    """Mean of the module's output (``AttentionOutput.context`` or the layer's hidden states) plus its aux loss."""
    tensor = output.context if isinstance(output, AttentionOutput) else output.hidden_states
    loss = tensor.float().mean()
    return loss if output.aux_loss is None else loss + output.aux_loss


def make_step(module: nn.Module, inputs: torch.Tensor, mode: str) -> Callable[[], None]:
    """One call of ``module`` on ``inputs [B, N, C]``: forward only, or forward and backward."""
    if mode == "fwd":
        module.eval()

        def step():
            with torch.no_grad():
                module(inputs, None, None, False)

        return step
    module.train()
    inputs = inputs.detach().requires_grad_(True)  # as for a layer inside a stack

    def step():
        output_loss(module(inputs, None, None, False)).backward()
        module.zero_grad(set_to_none=True)  # free the gradients inside the call, so that every call starts equal
        inputs.grad = None

    return step


# --- measuring -------------------------------------------------------------------------------------------


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def median_seconds(step: Callable[[], None], warmup: int, repeats: int, device: torch.device) -> float:
    """Median wall time of ``repeats`` calls of ``step`` after ``warmup`` untimed ones."""
    for _ in range(warmup):
        step()
    times = []
    for _ in range(repeats):
        synchronize(device)
        start = time.perf_counter()
        step()
        synchronize(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


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


def measure(mechanism: str, part: str, length: int, args) -> dict[str, float]:
    """Times (ms) and peaks (MiB) of both modes; raises :class:`Infeasible` when out of memory or failing."""
    device = torch.device(args.device)
    try:
        module = build_module(mechanism, part, args, length)
        inputs = torch.randn(args.batch_size, length, args.hidden_size, device=device, dtype=DTYPES[args.dtype])
        result = {}
        for mode in MODES:
            step = make_step(module, inputs, mode)
            result[f"{mode}_ms"] = 1e3 * median_seconds(step, args.warmup, args.repeats, device)
            result[f"{mode}_peak_mib"] = peak_bytes(step, device) / MIB
        return result
    except (RuntimeError, ValueError) as error:
        reason = "out of memory" if is_out_of_memory(error) else f"failed: {str(error).splitlines()[0][:120]}"
        raise Infeasible(reason) from error
    finally:
        if device.type == "cuda":
            torch.cuda.empty_cache()


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
    return 2 * args.batch_size * length * args.hidden_size * DTYPES[args.dtype].itemsize / MIB


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


def bench_series(mechanism: str, part: str, args, memory_limit_mib: float, printer=print) -> list[Row]:
    """Rows of one mechanism and part over ``args.lengths`` (ascending); after the first infeasible length the
    longer ones are skipped too."""
    rows: list[Row] = []
    guide: list[Row] = []  # the measured rows the guard extrapolates from: the probes, then the series itself
    stop_note = None
    for length in sorted(args.lengths):
        row = empty_row(mechanism, part, length, args)
        try:
            if stop_note:
                raise Infeasible(stop_note)
            guide = guide or probe_rows(mechanism, part, length, args, memory_limit_mib)
            check_feasible(guide, length, args, memory_limit_mib)
            for key, value in measure(mechanism, part, length, args).items():
                setattr(row, key, round(value, 3))
            guide.append(row)
        except Infeasible as reason:
            row.note = str(reason)
            stop_note = stop_note or f"skipped: longer than N={length}, which was not measured ({reason})"
        printer(format_row(row), flush=True)
        rows.append(row)
    return rows


def empty_row(mechanism: str, part: str, length: int, args) -> Row:
    """The row of one mechanism, part and length, before it is measured."""
    return Row(mechanism, part, length, args.batch_size, args.hidden_size, args.num_heads, args.device, args.dtype)


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
                                  **measure(mechanism, part, probe, single_call)))
        except Infeasible as reason:
            raise Infeasible(f"{reason} already at N={probe} (probed up from N={PROBE_LENGTH})") from reason
        probe *= 2
    return probes


def format_row(row: Row) -> str:
    if row.fwd_bwd_ms is None:
        return f"{row.part:9s} {row.mechanism:15s} N={row.length:6d}  {row.note}"
    return (f"{row.part:9s} {row.mechanism:15s} N={row.length:6d}  fwd {row.fwd_ms:10.2f} ms  "
            f"fwd+bwd {row.fwd_bwd_ms:10.2f} ms  peak fwd {row.fwd_peak_mib:9.1f} MiB  "
            f"fwd+bwd {row.fwd_bwd_peak_mib:9.1f} MiB")


# --- summaries ----------------------------------------------------------------------------------------------


def series(rows: list[Row], mechanism: str, part: str, column: str = "fwd_bwd_ms") -> dict[int, float]:
    """``{N: value}`` of ``column`` over the measured rows of one mechanism and part."""
    return {row.length: getattr(row, column) for row in rows
            if row.mechanism == mechanism and row.part == part and getattr(row, column) is not None}


def growth_exponent(points: dict[int, float], fit_points: int) -> float | None:
    """Least-squares slope of ``log(value)`` over ``log(N)`` for the ``fit_points`` longest lengths."""
    lengths = sorted(points)[-fit_points:]
    if len(lengths) < 2:
        return None
    xs = [math.log(n) for n in lengths]
    ys = [math.log(points[n]) for n in lengths]
    x_mean, y_mean = statistics.fmean(xs), statistics.fmean(ys)
    return sum((x - x_mean) * (y - y_mean) for x, y in zip(xs, ys)) / sum((x - x_mean) ** 2 for x in xs)


def crossover_length(points: dict[int, float], baseline: dict[int, float], lengths: list[int]) -> int | None:
    """The shortest length from which ``points`` is faster than ``baseline`` at every longer length (a baseline
    skipped as infeasible counts as beaten); None if it never is."""
    crossover = None
    for length in sorted(lengths, reverse=True):
        if length not in points:
            continue
        if length in baseline and points[length] >= baseline[length]:
            break
        crossover = length
    return crossover


@dataclass
class Summary:
    """Per mechanism and part: where it starts beating sdpa (fwd+bwd) and how its fwd+bwd time grows."""

    mechanism: str
    part: str
    beats_sdpa_from: int | None
    exponent: float | None

    def describe(self) -> str:
        beats = "-" if self.mechanism == BASELINE else (
            f"N={self.beats_sdpa_from}" if self.beats_sdpa_from else "never in the measured range")
        growth = "-" if self.exponent is None else f"{self.exponent:.2f} (x{2 ** self.exponent:.2f} per doubling)"
        return f"{self.part:9s} {self.mechanism:15s} beats sdpa from: {beats:28s} time exponent: {growth}"


def summarise(rows: list[Row], args) -> list[Summary]:
    summaries = []
    for part in args.parts:
        baseline = series(rows, BASELINE, part)
        for mechanism in mechanisms_of(rows):
            points = series(rows, mechanism, part)
            summaries.append(Summary(mechanism, part, crossover_length(points, baseline, args.lengths),
                                     growth_exponent(points, args.fit_points)))
    return summaries


def mechanisms_of(rows: list[Row]) -> list[str]:
    return list(dict.fromkeys(row.mechanism for row in rows))


# --- outputs --------------------------------------------------------------------------------------------------


def write_csv(rows: list[Row], path: Path) -> None:
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(asdict(row) for row in rows)


def markdown_table(header: list[str], body: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(cells) + " |" for cells in body])


def pivot(rows: list[Row], part: str, cell: Callable[[str, int], str]) -> str:
    """A mechanisms x lengths markdown table whose cells are ``cell(mechanism, N)``."""
    lengths = sorted({row.length for row in rows})
    body = [[mechanism] + [cell(mechanism, n) for n in lengths] for mechanism in mechanisms_of(rows)]
    return markdown_table(["mechanism"] + [f"N={n}" for n in lengths], body)


def number_cell(values: dict[int, float], digits: int = 1) -> Callable[[int], str]:
    return lambda n: f"{values[n]:,.{digits}f}" if n in values else "skipped"


def ratio_cell(numerator: dict[int, float], denominator: dict[int, float], fmt: str,
               offset: float = 0.0) -> Callable[[int], str]:
    """Cells ``fmt.format(numerator / denominator - offset)``, "-" where either is missing."""
    return lambda n: fmt.format(numerator[n] / denominator[n] - offset) if n in numerator and n in denominator else "-"


def part_tables(rows: list[Row], part: str) -> list[tuple[str, str]]:
    """``(title, table)`` pairs for one part: times, peaks, speed-up over sdpa, and overhead over the floor."""
    def of(column):
        return lambda mechanism: series(rows, mechanism, part, column)

    time_fb, time_f, peak_fb = of("fwd_bwd_ms"), of("fwd_ms"), of("fwd_bwd_peak_mib")
    baseline, floor = time_fb(BASELINE), time_fb(FLOOR)
    return [
        ("forward+backward time (ms)", pivot(rows, part, lambda m, n: number_cell(time_fb(m))(n))),
        ("forward time (ms)", pivot(rows, part, lambda m, n: number_cell(time_f(m))(n))),
        ("forward+backward peak memory (MiB)", pivot(rows, part, lambda m, n: number_cell(peak_fb(m))(n))),
        ("speed-up over sdpa, forward+backward (sdpa time / time)",
         pivot(rows, part, lambda m, n: ratio_cell(baseline, time_fb(m), "{:.2f}x")(n))),
        ("overhead over the floor, forward+backward (time / floor time - 1)",
         pivot(rows, part, lambda m, n: ratio_cell(time_fb(m), floor, "{:+.0%}", offset=1.0)(n))),
    ]


def write_markdown(rows: list[Row], summaries: list[Summary], args, path: Path) -> None:
    device = torch.device(args.device)
    lines = [
        "# hf-effattn bench",
        "",
        f"Machine: {machine_description(device)}. Batch {args.batch_size}, hidden {args.hidden_size}, "
        f"{args.num_heads} heads, dtype {args.dtype}, median of {args.repeats} after {args.warmup} warm-up. "
        f"Peak memory: {memory_method(device)}. {load_average()} at the end.",
    ]
    for part in args.parts:
        lines += ["", f"## {'One attention layer' if part == 'attention' else 'One full encoder layer'}"]
        for title, table in part_tables(rows, part):
            lines += ["", f"{title}:", "", table]
    body = [[s.mechanism, s.part, "-" if s.mechanism == BASELINE else str(s.beats_sdpa_from or "never"),
             "-" if s.exponent is None else f"{s.exponent:.2f}"] for s in summaries]
    lines += ["", f"## Summary (fwd+bwd; exponent fitted over the {args.fit_points} longest lengths)", "",
              markdown_table(["mechanism", "part", "beats sdpa from N", "time exponent"], body)]
    notes = [f"- {row.part} {row.mechanism} N={row.length}: {row.note}" for row in rows if row.note]
    if notes:
        lines += ["", "## Skipped", ""] + notes
    path.write_text("\n".join(lines) + "\n")


def write_plot(rows: list[Row], args, path: Path) -> None:
    """Time (fwd+bwd solid, fwd dashed) and fwd+bwd peak memory against N, log-log, one colour per mechanism."""
    import matplotlib
    import matplotlib.ticker

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(len(args.parts), 2, figsize=(12, 4.5 * len(args.parts)), squeeze=False)
    colours = dict(zip(mechanisms_of(rows), plt.rcParams["axes.prop_cycle"].by_key()["color"] * 3))
    lengths = sorted({row.length for row in rows})
    for (time_axis, memory_axis), part in zip(axes, args.parts):
        for mechanism, colour in colours.items():
            for column, axis, style in (("fwd_bwd_ms", time_axis, "-"), ("fwd_ms", time_axis, "--"),
                                        ("fwd_bwd_peak_mib", memory_axis, "-")):
                points = series(rows, mechanism, part, column)
                if points:
                    label = mechanism if style == "-" else None
                    axis.plot(list(points), list(points.values()), style, marker="o", color=colour, label=label)
        time_axis.set(title=f"{part}: time (solid fwd+bwd, dashed fwd)", ylabel="ms")
        memory_axis.set(title=f"{part}: fwd+bwd peak memory", ylabel="MiB")
        for axis in (time_axis, memory_axis):
            axis.set(xscale="log", yscale="log", xlabel="sequence length N")
            axis.set_xticks(lengths, labels=[str(n) for n in lengths], minor=False)
            axis.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
            axis.grid(True, which="both", alpha=0.3)
            axis.legend(fontsize=8)
    figure.suptitle(f"{machine_description(torch.device(args.device))}; batch {args.batch_size}, "
                    f"hidden {args.hidden_size}, {args.num_heads} heads, {args.dtype}", fontsize=9)
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    plt.close(figure)


def machine_description(device: torch.device) -> str:
    if device.type == "cuda":
        return f"{torch.cuda.get_device_name(device)} (torch {torch.__version__})"
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


# --- entry point -------------------------------------------------------------------------------------------


def selected_mechanisms(settings: BenchmarkSettings) -> list[str]:
    """The requested mechanisms (default all registered), with ``sdpa`` and the floor added for comparison."""
    return list(dict.fromkeys((settings.attentions or list_attentions()) + [BASELINE, FLOOR]))


def run_benchmark(*, verbose: bool = True, **settings) -> list[Row]:
    """Measure every selected mechanism, part and length; returns the rows (``Row``: times in ms, peaks in MiB,
    None with a ``note`` where a length was skipped) in the order the command prints them (``verbose``).

    ``settings`` are the fields of :class:`BenchmarkSettings` (an unknown name is a ``TypeError``), e.g.
    ``run_benchmark(attentions=["psf"], lengths=[512, 1024], parts=["attention"], threads=1)``."""
    settings = BenchmarkSettings(**settings)
    settings.check()
    if settings.threads:
        torch.set_num_threads(settings.threads)
    device = torch.device(settings.device)
    memory_limit_mib = 1024 * settings.memory_limit_gb if settings.memory_limit_gb else default_memory_limit_mib(device)
    printer = print if verbose else (lambda *args, **kwargs: None)
    printer(f"Machine: {machine_description(device)}, {load_average()}\nPeak memory: {memory_method(device)}",
            flush=True)
    return [row for mechanism in selected_mechanisms(settings) for part in settings.parts
            for row in bench_series(mechanism, part, settings, memory_limit_mib, printer)]


def write_results(rows: list[Row], output_dir: str | Path, verbose: bool = True, **settings) -> list[Summary]:
    """Write ``results.csv``, ``results.md`` and ``results.png`` of ``rows`` into ``output_dir``; returns (and with
    ``verbose`` prints) each mechanism's summary. ``settings``: those the rows were measured with (for the
    markdown's header and the fit)."""
    settings = BenchmarkSettings(**settings)
    summaries = summarise(rows, settings)
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    write_csv(rows, output_dir / "results.csv")
    write_markdown(rows, summaries, settings, output_dir / "results.md")
    write_plot(rows, settings, output_dir / "results.png")
    if verbose:
        print("\n".join(summary.describe() for summary in summaries))
        print(f"Wrote {output_dir / 'results.csv'}, results.md and results.png")
    return summaries


def run(args: argparse.Namespace) -> int:
    """``hf-effattn bench``: :func:`run_benchmark` and :func:`write_results` with the command line's settings."""
    settings = {name: getattr(args, name) for name in (f.name for f in fields(BenchmarkSettings))}
    rows = run_benchmark(**settings)
    if all(row.fwd_bwd_ms is None for row in rows):
        print("hf-effattn bench: error: nothing was measured (the notes above say why); nothing written. Shorten "
              "--lengths or --batch_size, or raise --memory_limit_gb or --time_limit.", file=sys.stderr)
        return 1
    write_results(rows, args.output_dir, **settings)
    return 0
