"""``results.csv`` and ``results.md``: the rows as CSV, and per part markdown tables of times, peaks, speed-ups over
sdpa (and Transformers' RoBERTa), times over the chunked reader's, overhead over the floor and compile times, with
the summary and the notes. A compiled row is compared with the compiled row of its baseline."""

from __future__ import annotations

import csv
from dataclasses import asdict
from pathlib import Path
from typing import Callable

import torch

from .machine import load_average, machine_description
from .measuring import memory_method
from .options import BASELINE, FLOOR
from .peers import CANNOT_RUN, PEERS, VOCAB_SIZE, describe_peers, selected_peers
from .rows import COLUMNS, COMPILED, Row, eager_name, mechanisms_of, twin
from .summary import Summary


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


def part_tables(rows: list[Row], part: str, fwd_bwd_only: bool = False) -> list[tuple[str, str]]:
    """``(title, table)`` pairs for one part: times (the forward's unless ``fwd_bwd_only``), peaks, speed-up over
    sdpa (and, with the peers, over Transformers' ``RobertaModel`` with sdpa), the time over the chunked reader's,
    overhead over the floor, and the compile times of compiled rows."""
    index = {(row.mechanism, row.length): row for row in rows if row.part == part}
    measured = mechanisms_of(rows, part)

    def number(column):
        return lambda mechanism, n: number_cell(index.get((mechanism, n)), column)

    def over(baseline, fmt, offset=0.0, speed_up=False):
        """``fmt`` of a row's time over ``baseline``'s of the same kind (or the inverse: a speed-up)."""
        def cell(mechanism, n):
            pair = index.get((mechanism, n)), index.get((twin(baseline, mechanism), n))
            return ratio_cell(*(pair[::-1] if speed_up else pair), fmt, offset)
        return cell

    tables = [("forward+backward time (ms)", pivot(rows, part, number("fwd_bwd_ms")))]
    if not fwd_bwd_only:
        tables.append(("forward time (ms)", pivot(rows, part, number("fwd_ms"))))
    tables += [
        ("forward+backward peak memory (MiB)", pivot(rows, part, number("fwd_bwd_peak_mib"))),
        ("speed-up over sdpa, forward+backward (sdpa time / time)", pivot(rows, part, over(BASELINE, "{:.2f}x",
                                                                                          speed_up=True))),
    ]
    roberta, chunks = PEERS["roberta-sdpa"].label, PEERS["roberta-chunks512"].label
    if roberta in measured:
        tables.append((f"speed-up over {roberta} (Transformers' RobertaModel, sdpa), forward+backward",
                       pivot(rows, part, over(roberta, "{:.2f}x", speed_up=True))))
    if chunks in measured:
        tables.append((f"time over the chunked reader's ({chunks}), forward+backward (time / its time)",
                       pivot(rows, part, over(chunks, "{:.2f}x"))))
    tables.append(("overhead over the floor, forward+backward (time / floor time - 1)",
                   pivot(rows, part, over(FLOOR, "{:+.0%}", 1.0))))
    compiled = [row for row in rows if row.part == part and row.compile_s is not None]
    if compiled:
        tables.append(("compile time (s; the first call of each mode, not counted above)",
                       pivot(compiled, part, number("compile_s"))))
    return tables


def part_title(part: str, args) -> str:
    return PART_TITLES.get(part) or f"Whole encoder ({args.num_layers} layers and the embeddings, no pooler)"


def write_markdown(rows: list[Row], summaries: list[Summary], args, path: Path) -> None:
    device = torch.device(args.device)
    lines = [
        "# hf-effattn bench",
        "",
        f"Machine: {machine_description(device)}. {args.batch_description()}, hidden {args.hidden_size}, "
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
    if args.compile:
        lines += ["", f"`<row>{COMPILED}`: the row's module compiled with `torch.compile` (default settings), timed in "
                      "the same turns once compiled; its ratios are over the compiled row of the baseline, and its "
                      "compilation (the first call of each mode) is timed apart."]
    for part in args.parts:
        lines += ["", f"## {part_title(part, args)}"]
        for title, table in part_tables(rows, part, args.fwd_bwd_only):
            lines += ["", f"{title}:", "", table]
        if any(row.note and row.fwd_bwd_ms is not None for row in rows if row.part == part):
            lines += ["", MARK_CAPTION]
    body = [[s.mechanism, s.part, "-" if eager_name(s.mechanism) == BASELINE else str(s.beats_sdpa_from or "never"),
             str(s.beats_peers_from or "never") if s.compares_to_peers else "-",
             "-" if s.exponent is None else f"{s.exponent:.2f}"] for s in summaries]
    lines += ["", f"## Summary (fwd+bwd; exponent fitted over the {args.fit_points} longest lengths)", "",
              markdown_table(["mechanism", "part", "beats sdpa from N", "beats every peer from N", "time exponent"],
                             body)]
    notes = [f"- {row.part} {row.mechanism} N={row.length}: {row.note}" for row in rows if row.note]
    if notes:
        lines += ["", "## Notes (skipped lengths; peers that could not run, or ran otherwise)", ""] + notes
    path.write_text("\n".join(lines) + "\n")
