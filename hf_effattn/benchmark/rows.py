"""The results of ``hf-effattn bench``: one :class:`Row` per mechanism, part and length (the lines of
``results.csv``), :class:`Infeasible` (why a row has no numbers), the names of compiled rows, and reading rows back
as series."""

from __future__ import annotations

from dataclasses import dataclass, fields


COMPILED = "@compiled"  # the suffix of a row's compiled twin: "kerformer@compiled"


def eager_name(name: str) -> str:
    """The row that a compiled row twins: ``"kerformer"`` for ``"kerformer@compiled"``; any other name itself."""
    return name.removesuffix(COMPILED)


def twin(name: str, of: str) -> str:
    """``name``'s row of the same kind as row ``of``: compiled where ``of`` is (``"sdpa@compiled"`` for
    ``"kerformer@compiled"``), else ``name``."""
    return name + COMPILED if of.endswith(COMPILED) else name


@dataclass
class Row:
    """One line of ``results.csv``: a mechanism, part and length, and the sequences of a call (``batch_size``); times
    in ms, peaks in MiB (None if skipped or not timed); ``compile_s``: a compiled row's compilation (the first call
    of each mode, not counted in the times)."""

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
    compile_s: float | None = None
    note: str = ""

COLUMNS = [f.name for f in fields(Row)]


class Infeasible(Exception):
    """A length that is not measured: predicted too slow or too large, out of memory, or failing."""


def empty_row(mechanism: str, part: str, length: int, args) -> Row:
    """The row of one mechanism, part and length, before it is measured."""
    return Row(mechanism, part, length, args.batch_at(length), args.hidden_size, args.num_heads, args.device,
               args.dtype)


def format_row(row: Row) -> str:
    if row.fwd_bwd_ms is None:
        return f"{row.part:9s} {row.mechanism:24s} N={row.length:6d}  {row.note}"
    forward = "" if row.fwd_ms is None else f"fwd {row.fwd_ms:10.2f} ms  "
    peak = "" if row.fwd_peak_mib is None else f"peak fwd {row.fwd_peak_mib:9.1f} MiB  "
    compiling = "" if row.compile_s is None else f"  compiled in {row.compile_s:.1f} s"
    return (f"{row.part:9s} {row.mechanism:24s} N={row.length:6d} B={row.batch_size:<4d} {forward}"
            f"fwd+bwd {row.fwd_bwd_ms:10.2f} ms  {peak}peak fwd+bwd {row.fwd_bwd_peak_mib:9.1f} MiB{compiling}"
            + (f"  ({row.note})" if row.note else ""))


def series(rows: list[Row], mechanism: str, part: str, column: str = "fwd_bwd_ms") -> dict[int, float]:
    """``{N: value}`` of ``column`` over the measured rows of one mechanism and part."""
    return {row.length: getattr(row, column) for row in rows
            if row.mechanism == mechanism and row.part == part and getattr(row, column) is not None}


def mechanisms_of(rows: list[Row], part: str | None = None) -> list[str]:
    """The mechanisms (and peers) of ``rows``, of one ``part`` or all, in order of appearance."""
    return list(dict.fromkeys(row.mechanism for row in rows if part in (None, row.part)))
