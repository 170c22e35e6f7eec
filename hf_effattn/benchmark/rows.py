"""The results of ``hf-effattn bench``: one :class:`Row` per mechanism, part and length (the lines of
``results.csv``), :class:`Infeasible` (why a row has no numbers), and reading rows back as series."""

from __future__ import annotations

from dataclasses import dataclass, fields


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


class Infeasible(Exception):
    """A length that is not measured: predicted too slow or too large, out of memory, or failing."""


def empty_row(mechanism: str, part: str, length: int, args) -> Row:
    """The row of one mechanism, part and length, before it is measured."""
    return Row(mechanism, part, length, args.batch_size, args.hidden_size, args.num_heads, args.device, args.dtype)


def format_row(row: Row) -> str:
    if row.fwd_bwd_ms is None:
        return f"{row.part:9s} {row.mechanism:20s} N={row.length:6d}  {row.note}"
    return (f"{row.part:9s} {row.mechanism:20s} N={row.length:6d}  fwd {row.fwd_ms:10.2f} ms  "
            f"fwd+bwd {row.fwd_bwd_ms:10.2f} ms  peak fwd {row.fwd_peak_mib:9.1f} MiB  "
            f"fwd+bwd {row.fwd_bwd_peak_mib:9.1f} MiB" + (f"  ({row.note})" if row.note else ""))


def series(rows: list[Row], mechanism: str, part: str, column: str = "fwd_bwd_ms") -> dict[int, float]:
    """``{N: value}`` of ``column`` over the measured rows of one mechanism and part."""
    return {row.length: getattr(row, column) for row in rows
            if row.mechanism == mechanism and row.part == part and getattr(row, column) is not None}


def mechanisms_of(rows: list[Row], part: str | None = None) -> list[str]:
    """The mechanisms (and peers) of ``rows``, of one ``part`` or all, in order of appearance."""
    return list(dict.fromkeys(row.mechanism for row in rows if part in (None, row.part)))
