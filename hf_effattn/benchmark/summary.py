"""The summaries of the rows: from which length a mechanism beats sdpa (and, with the peers, every peer), and the
log-log slope of its time over the longest lengths. A compiled row is compared with compiled rows only."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from .options import BASELINE, FLOOR
from .peers import peer_of
from .rows import COMPILED, Row, eager_name, mechanisms_of, series, twin


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
        beats = "-" if eager_name(self.mechanism) == BASELINE else from_length(self.beats_sdpa_from)
        line = f"{self.part:9s} {self.mechanism:24s} beats sdpa from: {beats:28s} time exponent: {growth}"
        if self.compares_to_peers:
            line += f"  beats every peer from: {from_length(self.beats_peers_from)}"
        return line


def from_length(length: int | None) -> str:
    return f"N={length}" if length else "never in the measured range"


def fastest_peer(rows: list[Row], part: str, compiled: bool = False) -> dict[int, float]:
    """``{N: fwd+bwd time}`` of the fastest peer measured at each length (a peer that could not run is left out),
    among the compiled peers' rows where ``compiled``, else among the others."""
    fastest: dict[int, float] = {}
    for peer in (mechanism for mechanism in mechanisms_of(rows, part)
                 if peer_of(mechanism) and mechanism.endswith(COMPILED) == compiled):
        for length, value in series(rows, peer, part).items():
            fastest[length] = min(value, fastest.get(length, value))
    return fastest


def summarise(rows: list[Row], args) -> list[Summary]:
    summaries = []
    for part in args.parts:
        for mechanism in mechanisms_of(rows, part):
            baseline = series(rows, twin(BASELINE, mechanism), part)
            peers = fastest_peer(rows, part, compiled=mechanism.endswith(COMPILED))
            points = series(rows, mechanism, part)
            compares = bool(peers) and not peer_of(mechanism) and eager_name(mechanism) not in (BASELINE, FLOOR)
            summaries.append(Summary(
                mechanism, part, crossover_length(points, baseline, args.lengths),
                growth_exponent(points, args.fit_points),
                crossover_length(points, peers, args.lengths) if compares else None, compares))
    return summaries
