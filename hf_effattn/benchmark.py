"""``hf-effattn bench``: time and peak memory of the mechanisms against SDPA, alone and in an encoder layer.

For every mechanism and length it measures, on batches of random inputs ``[B, N, C]``:

* ``part = attention``: the mechanism alone (its projections and token mixing, before the output projection);
* ``part = layer``: one full post-LN encoder layer (``EffAttnRobertaLayer``) built around it;
* ``part = encoder``: a whole ``EffAttnRobertaModel`` of ``--num_layers`` layers (embeddings, no pooler) on token
  ids ``[B, N]`` and an all-ones attention mask; with ``--peers``, Transformers' own encoders beside it
  (:mod:`hf_effattn.benchmark_peers`: RoBERTa with sdpa and eager, Nystromformer, BigBird, Longformer);

each in two modes: ``fwd`` (eval mode, no autograd) and ``fwd_bwd`` (train mode, forward and backward of the
output's mean plus the mechanism's auxiliary loss). Times are the median of ``--repeats`` calls after
``--warmup`` calls; the mechanisms of a part and length take turns, one call each per round (round-robin), so
that a busy stretch of a shared machine slows them alike. Peak memory is the most memory held at once during one
call, above what was held before it: on CUDA ``torch.cuda.max_memory_allocated`` after a reset; on CPU the
running sum of the allocations and frees that PyTorch's CPU allocator reports to ``torch.profiler``
(``profile_memory=True``).

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

from .benchmark_peers import CANNOT_RUN, PEERS, VOCAB_SIZE, Peer, describe_peers, peer_of, selected_peers
from .modeling.attentions import AttentionOutput, AttentionSettings, EfficientAttention, list_attentions

FLOOR = "floor"
BASELINE = "sdpa"
PARTS = ("attention", "layer", "encoder")
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
    N to run. ``parts``: among ``"attention"``, ``"layer"``, ``"encoder"``. ``intermediate_size`` None: 4 x hidden.
    ``num_layers``: layers of the whole encoder (part ``encoder``). ``peers``: Transformers' encoders timed beside
    ours in part ``encoder`` (True: all of :data:`~hf_effattn.benchmark_peers.PEERS`, or a list of their keys).
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
    num_layers: int = 2
    peers: bool | list[str] = False
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
        unknown_peers = sorted(set(self.peers) - set(PEERS)) if isinstance(self.peers, list) else []
        if unknown_peers:
            raise ValueError(f"Unknown peer(s) {', '.join(unknown_peers)}: choose from {', '.join(PEERS)}.")
        if self.peers and "encoder" not in self.parts:
            raise ValueError(f"parts={self.parts}: the peers are whole encoders, add 'encoder' to the parts.")
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
    parser.add_argument("--num_layers", type=int, default=defaults.num_layers, help="layers of the whole encoder")
    parser.add_argument("--peers", nargs="*", choices=list(PEERS), default=False, metavar="PEER",
                        help="also time Transformers' encoders as whole encoders (part encoder): all without "
                             f"names, or some of {', '.join(PEERS)}")
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


def layer_config(mechanism: str, args, length: int, num_layers: int = 1):
    """An ``EffAttnRobertaConfig`` of ``num_layers`` layers running ``mechanism`` (the floor starts from ``sdpa``),
    dropout off."""
    from .modeling.configuration_effattn import EffAttnRobertaConfig

    return EffAttnRobertaConfig(
        hidden_size=args.hidden_size,
        num_attention_heads=args.num_heads,
        intermediate_size=args.intermediate_size or 4 * args.hidden_size,
        num_hidden_layers=num_layers,
        attention_type=BASELINE if mechanism == FLOOR else mechanism,
        max_position_embeddings=args.max_length or length,
        roberta_positions=False,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )


def floor_attention(args) -> FloorAttention:
    return FloorAttention(args.hidden_size, args.num_heads, AttentionSettings())


def build_module(mechanism: str, part: str, args, length: int) -> nn.Module:
    """The measured module on ``args.device`` in ``args.dtype``: a mechanism, an ``EffAttnRobertaLayer``, or a whole
    ``EffAttnRobertaModel`` of ``args.num_layers`` layers (part ``encoder``, no pooler); a peer's model for
    ``peer:<key>``."""
    from .modeling.encoder import EffAttnRobertaLayer
    from .modeling.modeling_effattn_roberta import EffAttnRobertaModel

    torch.manual_seed(args.seed)
    peer = peer_of(mechanism)
    if peer:
        module = peer.build(args, length)
    elif part == "encoder":
        module = EffAttnRobertaModel(layer_config(mechanism, args, length, args.num_layers), add_pooling_layer=False)
        if mechanism == FLOOR:
            for layer in module.encoder.layer:
                layer.attention.self = floor_attention(args)
    else:
        layer = EffAttnRobertaLayer(layer_config(mechanism, args, length), layer_idx=0)
        if mechanism == FLOOR:
            layer.attention.self = floor_attention(args)
        module = layer if part == "layer" else layer.attention.self
    return module.to(device=args.device, dtype=DTYPES[args.dtype])


@dataclass
class Subject:
    """What is timed at one length: ``module``, the call that runs it on fixed inputs, the input tensor whose
    gradient a backward fills (None for token ids), and the peer whose model it is (None for ours)."""

    module: nn.Module
    call: Callable[[], object]
    leaf: torch.Tensor | None = None
    peer: Peer | None = None


def build_subject(mechanism: str, part: str, length: int, args) -> Subject:
    """The module of ``mechanism`` and ``part`` on random inputs: hidden states ``[B, N, C]`` for a mechanism or a
    layer; for an encoder, token ids ``[B, N]`` (none of the special ids 0-2) and an all-ones attention mask, as a
    tokenizer returns for unpadded text (the same for every encoder, ours and the peers')."""
    peer = peer_of(mechanism)
    if peer and peer.cannot_run(length):
        raise Infeasible(peer.cannot_run(length))
    module = build_module(mechanism, part, args, length)
    generator = torch.Generator().manual_seed(args.seed)
    if part == "encoder":
        input_ids = torch.randint(3, module.config.vocab_size, (args.batch_size, length), generator=generator)
        input_ids = input_ids.to(args.device)
        attention_mask = torch.ones_like(input_ids)
        return Subject(module, lambda: module(input_ids=input_ids, attention_mask=attention_mask), peer=peer)
    inputs = torch.randn(args.batch_size, length, args.hidden_size, generator=generator)
    inputs = inputs.to(device=args.device, dtype=DTYPES[args.dtype]).requires_grad_(True)  # as inside a stack
    return Subject(module, lambda: module(inputs, None, None, False), leaf=inputs)


def output_loss(output) -> torch.Tensor:
    """Mean of the output (``AttentionOutput.context``, a layer's ``hidden_states`` or a model's
    ``last_hidden_state``) plus its auxiliary loss, if any."""
    if isinstance(output, AttentionOutput):
        tensor = output.context
    elif getattr(output, "last_hidden_state", None) is not None:  # a model's output
        tensor = output.last_hidden_state
    else:  # a layer's LayerOutput
        tensor = output.hidden_states
    loss = tensor.float().mean()
    aux_loss = getattr(output, "aux_loss", None)
    return loss if aux_loss is None else loss + aux_loss


def make_step(subject: Subject, mode: str) -> Callable[[], None]:
    """One call of the subject's module: forward only (eval mode, no autograd), or forward and backward."""
    module = subject.module
    if mode == "fwd":
        module.eval()

        def step():
            with torch.no_grad():
                subject.call()

        return step
    module.train()

    def step():
        output_loss(subject.call()).backward()
        module.zero_grad(set_to_none=True)  # free the gradients inside the call, so that every call starts equal
        if subject.leaf is not None:
            subject.leaf.grad = None

    return step


# --- measuring -------------------------------------------------------------------------------------------


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
    """Times (ms, median of ``args.repeats`` after ``args.warmup``) and peaks (MiB) of both modes of every subject.

    The calls take turns, one call of each subject per round, so that a slower or busier stretch of the machine
    falls on all of them alike and their ratios hold. A subject that fails (out of memory, an error) leaves the
    turns and is answered with :class:`Infeasible`."""
    device = torch.device(args.device)
    results: dict[str, dict[str, float] | Infeasible] = {name: {} for name in subjects}
    for mode in MODES:
        steps = {name: make_step(subject, mode) for name, subject in subjects.items()
                 if not isinstance(results[name], Infeasible)}
        times: dict[str, list[float]] = {name: [] for name in steps}
        for turn in range(args.warmup + args.repeats):
            for name, step in steps.items():
                if isinstance(results[name], Infeasible):
                    continue
                try:
                    seconds = timed_seconds(step, device)
                except (RuntimeError, ValueError) as error:
                    results[name] = infeasible(error)
                    continue
                if turn >= args.warmup:
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


def bench_part(mechanisms: list[str], part: str, args, memory_limit_mib: float, printer=print) -> list[Row]:
    """Rows of ``mechanisms`` in one part over ``args.lengths`` (ascending), all mechanisms of a length timed
    round-robin (:func:`measure_round_robin`); after a mechanism's first infeasible length its longer ones are
    skipped too. A peer's row that ran something else than its mechanism (full attention, padding) has times and a
    note that says so. Returned mechanism by mechanism, each by length."""
    measured: dict[str, list[Row]] = {mechanism: [] for mechanism in mechanisms}
    guides: dict[str, list[Row]] = {}  # the rows each guard extrapolates from: the probes, then the measured rows
    stop_notes: dict[str, str] = {}
    for length in sorted(args.lengths):
        rows, subjects = {}, {}
        for mechanism in mechanisms:
            rows[mechanism] = empty_row(mechanism, part, length, args)
            try:
                if mechanism in stop_notes:
                    raise Infeasible(stop_notes[mechanism])
                guides[mechanism] = guides.get(mechanism) or probe_rows(mechanism, part, length, args,
                                                                        memory_limit_mib)
                check_feasible(guides[mechanism], length, args, memory_limit_mib)
                subjects[mechanism] = build_subject(mechanism, part, length, args)
            except Infeasible as reason:
                rows[mechanism].note = str(reason)
            except (RuntimeError, ValueError) as error:
                rows[mechanism].note = str(infeasible(error))
        for mechanism, result in measure_round_robin(subjects, args).items():
            if isinstance(result, Infeasible):
                rows[mechanism].note = str(result)
                continue
            for key, value in result.items():
                setattr(rows[mechanism], key, round(value, 3))
            guides[mechanism].append(rows[mechanism])
            subject = subjects[mechanism]
            rows[mechanism].note = subject.peer.runs_otherwise(subject.module, length) if subject.peer else ""
        subjects.clear()
        for mechanism, row in rows.items():
            if row.fwd_bwd_ms is None and mechanism not in stop_notes and not row.note.startswith(CANNOT_RUN):
                stop_notes[mechanism] = f"skipped: longer than N={length}, which was not measured ({row.note})"
            printer(format_row(row), flush=True)
            measured[mechanism].append(row)
    return [row for mechanism in mechanisms for row in measured[mechanism]]


def empty_row(mechanism: str, part: str, length: int, args) -> Row:
    """The row of one mechanism, part and length, before it is measured."""
    return Row(mechanism, part, length, args.batch_size, args.hidden_size, args.num_heads, args.device, args.dtype)


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


def format_row(row: Row) -> str:
    if row.fwd_bwd_ms is None:
        return f"{row.part:9s} {row.mechanism:20s} N={row.length:6d}  {row.note}"
    return (f"{row.part:9s} {row.mechanism:20s} N={row.length:6d}  fwd {row.fwd_ms:10.2f} ms  "
            f"fwd+bwd {row.fwd_bwd_ms:10.2f} ms  peak fwd {row.fwd_peak_mib:9.1f} MiB  "
            f"fwd+bwd {row.fwd_bwd_peak_mib:9.1f} MiB" + (f"  ({row.note})" if row.note else ""))


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
    """Per mechanism and part: where it starts beating sdpa (fwd+bwd), where it starts beating every peer (ours,
    part ``encoder``, with peers measured; else None), and how its fwd+bwd time grows."""

    mechanism: str
    part: str
    beats_sdpa_from: int | None
    exponent: float | None
    beats_peers_from: int | None = None
    compares_to_peers: bool = False

    def describe(self) -> str:
        growth = "-" if self.exponent is None else f"{self.exponent:.2f} (x{2 ** self.exponent:.2f} per doubling)"
        beats = "-" if self.mechanism == BASELINE else from_length(self.beats_sdpa_from)
        line = f"{self.part:9s} {self.mechanism:20s} beats sdpa from: {beats:28s} time exponent: {growth}"
        if self.compares_to_peers:
            line += f"  beats every peer from: {from_length(self.beats_peers_from)}"
        return line


def from_length(length: int | None) -> str:
    return f"N={length}" if length else "never in the measured range"


def fastest_peer(rows: list[Row], part: str) -> dict[int, float]:
    """``{N: fwd+bwd time}`` of the fastest peer measured at each length (a peer that could not run is left out)."""
    fastest: dict[int, float] = {}
    for peer in (mechanism for mechanism in mechanisms_of(rows, part) if peer_of(mechanism)):
        for length, value in series(rows, peer, part).items():
            fastest[length] = min(value, fastest.get(length, value))
    return fastest


def summarise(rows: list[Row], args) -> list[Summary]:
    summaries = []
    for part in args.parts:
        baseline, peers = series(rows, BASELINE, part), fastest_peer(rows, part)
        for mechanism in mechanisms_of(rows, part):
            points = series(rows, mechanism, part)
            compares = bool(peers) and not peer_of(mechanism) and mechanism not in (BASELINE, FLOOR)
            summaries.append(Summary(
                mechanism, part, crossover_length(points, baseline, args.lengths),
                growth_exponent(points, args.fit_points),
                crossover_length(points, peers, args.lengths) if compares else None, compares))
    return summaries


def mechanisms_of(rows: list[Row], part: str | None = None) -> list[str]:
    """The mechanisms (and peers) of ``rows``, of one ``part`` or all, in order of appearance."""
    return list(dict.fromkeys(row.mechanism for row in rows if part in (None, row.part)))


# --- outputs --------------------------------------------------------------------------------------------------


def write_csv(rows: list[Row], path: Path) -> None:
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(asdict(row) for row in rows)


def markdown_table(header: list[str], body: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(cells) + " |" for cells in body])


PART_TITLES = {"attention": "One attention layer", "layer": "One full encoder layer"}
MARK = " *"
MARK_CAPTION = (f"`{MARK.strip()}`: measured, but the peer did not run its own mechanism as such at that length "
                "(full attention, padded inputs): see the notes.")


def pivot(rows: list[Row], part: str, cell: Callable[[str, int], str]) -> str:
    """A mechanisms x lengths markdown table of one part whose cells are ``cell(mechanism, N)``."""
    lengths = sorted({row.length for row in rows})
    body = [[mechanism] + [cell(mechanism, n) for n in lengths] for mechanism in mechanisms_of(rows, part)]
    return markdown_table(["mechanism"] + [f"N={n}" for n in lengths], body)


def number_cell(row: Row | None, column: str, digits: int = 1) -> str:
    """The row's value, marked when the row has a note; "cannot run" or "skipped" when it has none."""
    value = None if row is None else getattr(row, column)
    if value is None:
        return CANNOT_RUN if row is not None and row.note.startswith(CANNOT_RUN) else "skipped"
    return f"{value:,.{digits}f}" + (MARK if row.note else "")


def ratio_cell(numerator: Row | None, denominator: Row | None, fmt: str, offset: float = 0.0) -> str:
    """``fmt.format(numerator / denominator - offset)`` of the fwd+bwd times, marked when either row has a note;
    "-" where either is missing."""
    if numerator is None or denominator is None or None in (numerator.fwd_bwd_ms, denominator.fwd_bwd_ms):
        return "-"
    marked = numerator.note or denominator.note
    return fmt.format(numerator.fwd_bwd_ms / denominator.fwd_bwd_ms - offset) + (MARK if marked else "")


def part_tables(rows: list[Row], part: str) -> list[tuple[str, str]]:
    """``(title, table)`` pairs for one part: times, peaks, speed-up over sdpa (and, with the peers, over
    Transformers' ``RobertaModel`` with sdpa), and overhead over the floor."""
    index = {(row.mechanism, row.length): row for row in rows if row.part == part}

    def number(column):
        return lambda mechanism, n: number_cell(index.get((mechanism, n)), column)

    def speed_up(baseline):
        return lambda mechanism, n: ratio_cell(index.get((baseline, n)), index.get((mechanism, n)), "{:.2f}x")

    tables = [
        ("forward+backward time (ms)", pivot(rows, part, number("fwd_bwd_ms"))),
        ("forward time (ms)", pivot(rows, part, number("fwd_ms"))),
        ("forward+backward peak memory (MiB)", pivot(rows, part, number("fwd_bwd_peak_mib"))),
        ("speed-up over sdpa, forward+backward (sdpa time / time)", pivot(rows, part, speed_up(BASELINE))),
    ]
    roberta = PEERS["roberta-sdpa"].label
    if roberta in mechanisms_of(rows, part):
        tables.append((f"speed-up over {roberta} (Transformers' RobertaModel, sdpa), forward+backward",
                       pivot(rows, part, speed_up(roberta))))
    overhead = lambda mechanism, n: ratio_cell(index.get((mechanism, n)), index.get((FLOOR, n)), "{:+.0%}", 1.0)
    tables.append(("overhead over the floor, forward+backward (time / floor time - 1)", pivot(rows, part, overhead)))
    return tables


def part_title(part: str, args) -> str:
    return PART_TITLES.get(part) or f"Whole encoder ({args.num_layers} layers and the embeddings, no pooler)"


def write_markdown(rows: list[Row], summaries: list[Summary], args, path: Path) -> None:
    device = torch.device(args.device)
    lines = [
        "# hf-effattn bench",
        "",
        f"Machine: {machine_description(device)}. Batch {args.batch_size}, hidden {args.hidden_size}, "
        f"{args.num_heads} heads, dtype {args.dtype}, median of {args.repeats} after {args.warmup} warm-up, the "
        f"mechanisms of a part and length timed in turns (round-robin). Peak memory: {memory_method(device)}. "
        f"{load_average()} at the end.",
    ]
    if "encoder" in args.parts:
        lines += ["", f"Whole encoders: {args.num_layers} layers, vocabulary {VOCAB_SIZE:,}, random token ids and an "
                      "all-ones attention mask (no padding), the same for every encoder."]
    peers = selected_peers(args.peers)
    if peers:
        lines += ["", f"Peers (part encoder, same width, depth, heads, feed-forward and inputs): "
                      f"{describe_peers(peers)}."]
    for part in args.parts:
        lines += ["", f"## {part_title(part, args)}"]
        for title, table in part_tables(rows, part):
            lines += ["", f"{title}:", "", table]
        if any(row.note and row.fwd_bwd_ms is not None for row in rows if row.part == part):
            lines += ["", MARK_CAPTION]
    body = [[s.mechanism, s.part, "-" if s.mechanism == BASELINE else str(s.beats_sdpa_from or "never"),
             str(s.beats_peers_from or "never") if s.compares_to_peers else "-",
             "-" if s.exponent is None else f"{s.exponent:.2f}"] for s in summaries]
    lines += ["", f"## Summary (fwd+bwd; exponent fitted over the {args.fit_points} longest lengths)", "",
              markdown_table(["mechanism", "part", "beats sdpa from N", "beats every peer from N", "time exponent"],
                             body)]
    notes = [f"- {row.part} {row.mechanism} N={row.length}: {row.note}" for row in rows if row.note]
    if notes:
        lines += ["", "## Notes (skipped lengths; peers that could not run, or ran otherwise)", ""] + notes
    path.write_text("\n".join(lines) + "\n")


def write_plot(rows: list[Row], args, path: Path) -> None:
    """Time (fwd+bwd solid, fwd dashed) and fwd+bwd peak memory against N, log-log, one colour per mechanism;
    circles for ours, squares for the peers."""
    import matplotlib
    import matplotlib.ticker

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(len(args.parts), 2, figsize=(12, 4.5 * len(args.parts)), squeeze=False)
    colours = dict(zip(mechanisms_of(rows), plt.get_cmap("tab20").colors * 2))
    lengths = sorted({row.length for row in rows})
    for (time_axis, memory_axis), part in zip(axes, args.parts):
        for mechanism, colour in colours.items():  # a mechanism absent from this part has no points
            for column, axis, style in (("fwd_bwd_ms", time_axis, "-"), ("fwd_ms", time_axis, "--"),
                                        ("fwd_bwd_peak_mib", memory_axis, "-")):
                points = series(rows, mechanism, part, column)
                if points:
                    label = mechanism if style == "-" else None
                    axis.plot(list(points), list(points.values()), style, marker="s" if peer_of(mechanism) else "o",
                              color=colour, label=label)
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


def selected_mechanisms(settings: BenchmarkSettings, part: str) -> list[str]:
    """The requested mechanisms (default all registered), with ``sdpa`` and the floor added for comparison, and in
    part ``encoder`` the requested peers (``peer:<key>``)."""
    peers = [peer.label for peer in selected_peers(settings.peers)] if part == "encoder" else []
    return list(dict.fromkeys((settings.attentions or list_attentions()) + [BASELINE, FLOOR] + peers))


def run_benchmark(*, verbose: bool = True, **settings) -> list[Row]:
    """Measure every selected mechanism (and peer), part and length; returns the rows (``Row``: times in ms, peaks
    in MiB, None with a ``note`` where a length was skipped), part by part, each mechanism by mechanism.

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
    return [row for part in settings.parts
            for row in bench_part(selected_mechanisms(settings, part), part, settings, memory_limit_mib, printer)]


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
    if settings["peers"] == []:  # --peers without names: all of them
        settings["peers"] = True
    rows = run_benchmark(**settings)
    if all(row.fwd_bwd_ms is None for row in rows):
        print("hf-effattn bench: error: nothing was measured (the notes above say why); nothing written. Shorten "
              "--lengths or --batch_size, or raise --memory_limit_gb or --time_limit.", file=sys.stderr)
        return 1
    write_results(rows, args.output_dir, **settings)
    return 0
