"""The run: :func:`run_benchmark` measures every selected mechanism (and peer, and compiled twin), part and length,
the rows of a length in turns, each length guarded by the shorter ones, and returns the rows."""

from __future__ import annotations

import torch

from ..modeling.attentions import get_settings_class, list_attentions
from .guard import default_memory_limit_mib, guarded_subject, probe_rows
from .machine import load_average, machine_description
from .measuring import infeasible, measure_round_robin, memory_method
from .options import BASELINE, FLOOR, BenchmarkSettings
from .peers import CANNOT_RUN, selected_peers
from .rows import COMPILED, Infeasible, Row, eager_name, empty_row, format_row

# Every compiled graph counts against Dynamo's limit of 8 per function (by default), past which the function runs
# uncompiled without failing: here a compiled row's model (one per row, length and mode), and on CUDA each
# mechanism's fast path (one per mechanism, settings and shape family), so that a run of many rows would time the
# exact paths under the fast paths' names.
COMPILED_GRAPHS_LIMIT = 4096


def selected_mechanisms(settings: BenchmarkSettings, part: str) -> list[str]:
    """The requested mechanisms (default all registered), with ``local_window`` (``local_block``), each that takes
    one also beside the window (the blocks), ``<name>+w<W>`` (``<name>+b<S>``), ``sdpa`` and the floor added for
    comparison, in part ``encoder`` the requested peers (``peer:<key>``), and after each row that
    ``settings.compile`` names its ``<row>@compiled``."""
    requested = settings.attentions or list_attentions()
    local_parts = [(suffix, size) for suffix, size in (("w", settings.local_window), ("b", settings.local_block))
                   if size]
    # ``local`` at this window or in these blocks, not at its default window
    mechanisms = [name for name in requested if name != "local" or not local_parts] + [
        f"{name}+{suffix}{size}" for suffix, size in local_parts for name in requested
        if get_settings_class(name).local_part_role is not None]
    peers = [peer.label for peer in selected_peers(settings.peers)] if part == "encoder" else []
    rows = dict.fromkeys(mechanisms + [BASELINE, FLOOR] + peers)
    return [name for row in rows for name in ([row, row + COMPILED] if settings.compiles(row) else [row])]


def check_compiled_rows(settings: BenchmarkSettings) -> None:
    """Raise ``ValueError`` when ``settings.compile`` names a row that is not measured."""
    rows = {name for part in settings.parts for name in selected_mechanisms(settings, part)}
    unknown = sorted(set(settings.compile if isinstance(settings.compile, list) else []) - rows)
    if unknown:
        raise ValueError(f"compile={unknown}: not a measured row; choose among {', '.join(sorted(rows))} "
                         "(--compile without names compiles every row).")


def bench_part(mechanisms: list[str], part: str, args, memory_limit_mib: float, printer=print) -> list[Row]:
    """Rows of ``mechanisms`` in one part over ``args.lengths`` (ascending), all mechanisms of a length timed
    round-robin (:func:`measure_round_robin`); after a mechanism's first infeasible length its longer ones are
    skipped too. A peer's row that ran something else than its mechanism (full attention, padding) has times and a
    note that says so. Returned mechanism by mechanism, each by length."""
    measured: dict[str, list[Row]] = {mechanism: [] for mechanism in mechanisms}
    guides: dict[str, list[Row]] = {}  # the rows each guard extrapolates from: the probes, then the measured rows
    probes: dict[str, list[Row]] = {}  # of the eager rows; a compiled twin starts from its eager row's
    stop_notes: dict[str, str] = {}
    for length in sorted(args.lengths):
        rows, subjects = {}, {}
        for mechanism in mechanisms:
            rows[mechanism] = empty_row(mechanism, part, length, args)
            try:
                if mechanism in stop_notes:
                    raise Infeasible(stop_notes[mechanism])
                if mechanism not in guides:
                    eager = eager_name(mechanism)
                    probes[eager] = probes.get(eager) or probe_rows(eager, part, length, args, memory_limit_mib)
                    guides[mechanism] = list(probes[eager])
                subjects[mechanism] = guarded_subject(mechanism, part, length, args, guides[mechanism],
                                                      memory_limit_mib)
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


def run_benchmark(*, verbose: bool = True, **settings) -> list[Row]:
    """Measure every selected mechanism (and peer), part and length; returns the rows (``Row``: times in ms, peaks
    in MiB, None with a ``note`` where a length was skipped), part by part, each mechanism by mechanism.

    ``settings`` are the fields of :class:`BenchmarkSettings` (an unknown name is a ``TypeError``), e.g.
    ``run_benchmark(attentions=["psf"], lengths=[512, 1024], parts=["attention"], threads=1)``."""
    settings = BenchmarkSettings(**settings)
    settings.check()
    check_compiled_rows(settings)
    if settings.threads:
        torch.set_num_threads(settings.threads)
    device = torch.device(settings.device)
    memory_limit_mib = 1024 * settings.memory_limit_gb if settings.memory_limit_gb else default_memory_limit_mib(device)
    printer = print if verbose else (lambda *args, **kwargs: None)
    printer(f"Machine: {machine_description(device)}, {load_average()}\nPeak memory: {memory_method(device)}",
            flush=True)
    with torch._dynamo.config.patch(cache_size_limit=COMPILED_GRAPHS_LIMIT,
                                    accumulated_cache_size_limit=COMPILED_GRAPHS_LIMIT):
        return [row for part in settings.parts
                for row in bench_part(selected_mechanisms(settings, part), part, settings, memory_limit_mib, printer)]
