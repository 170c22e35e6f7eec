#!/usr/bin/env python
"""The block rows' tables: each seed's mechanism as a memory across blocks of 512 (issue 33), against the chunked
reader in the same code and framing (``local-b512``, the blocks alone), after the same budget.

Reads what ``pretrain.py``, ``long_range.py``, ``represent.py``, ``gate_start.py``, ``kernel_memory.py``,
``memory_mass.py`` and ``cost.py`` saved under ``results/`` and writes ``results/blocks.md`` (and
``results/blocks.png``: each block and chunks row's masked-LM loss after pretraining, lowest first), each table's
rows kept in ``tables/blocks_<table>.jsonl`` (``table_files.py``):

    python research/long_documents/block_tables.py
"""

from __future__ import annotations

import math
from pathlib import Path

from controls import BLOCK_ROWS, CHUNK_ROWS, CHUNKS, control_of, shared_twin, without_memory
from cost import BLOCK_COST_ROWS
from cost_tables import cost_ratio
from gate_start import table as gate_start_table
from kernel_memory import KIND as ALL_KEYS, REMADE_ROWS
import memory_mass
from pretrain import applies
from rows import ROWS
from runs import read_result
from table_files import figure_and_axes, markdown_table, mean_and_error, measured_here, publish, save_figure, \
    table_rows
from tables import STAGE_TITLES, mlm, number, paired_loss, representation, share_cell, target

def measured(body: list[list[str]], always: int = 0) -> list[list[str]]:
    """The rows of table ``body`` that hold a measurement: a cell after the name, and before the last ``always``
    cells (which every row fills, like the cost of its architecture), other than "not run" or "-"."""
    return [row for row in body if any(cell not in ("not run", "-") for cell in row[1:len(row) - always])]


def not_run() -> str:
    """The block and chunks rows defined in ``rows.py`` that no stage has run yet (left out of the tables)."""
    names = [row[0] for row in table_rows("blocks_not_run", lambda: [
        [f"`{name}`"] for name in [*CHUNK_ROWS, *BLOCK_ROWS]
        if all(mlm(name, stage) is None for stage in STAGE_TITLES)])]
    return f"Defined in `rows.py`, not run yet (left out of the tables): {', '.join(names)}." if names else ""


def long_range_pair(name: str) -> tuple[dict | None, dict | None]:
    """``long_range.py``'s per-token losses of row ``name`` after pretraining, and of its control's."""
    return read_result("long_range", f"{name}@mlm"), read_result("long_range", f"{control_of(name)}@mlm")


def every_token(mine: dict, theirs: dict) -> tuple[float, float]:
    """The mean per-token loss difference of two readers on the same masked tokens, and its s.e."""
    return mean_and_error([a - b for a, b in zip(mine["losses"], theirs["losses"])])


def start_of(row) -> float:
    """Where the gates of ``row`` start beside its blocks: its setting, else its mechanism's default for its settings
    (a kernelized memory under the blocks' normaliser 1e-4, a memory mixed per head 0.1)."""
    from hf_effattn import build_settings
    from hf_effattn.modeling.local_settings import local_part_settings, split_local_settings

    own, local = split_local_settings(row.settings)
    role = build_settings(row.attention, own).local_part_role
    return local_part_settings(local, role).gate_start(role)


def gates_text(weights: list | None, start: float) -> str:
    """Per-layer gates ``weights``: their mean over layers and heads, and its range, against their ``start``."""
    weights = [w for layer in weights or [] if layer for w in layer]
    if not weights:
        return "not run"
    return f"{sum(weights) / len(weights):.3g} [{min(weights):.3g}, {max(weights):.3g}] from {start:g}"


def gates_cell(name: str) -> str:
    """The gates of row ``name`` after pretraining (:func:`gates_text`)."""
    return gates_text(mlm(name, "mlm", "mechanism_weights"), start_of(ROWS[name]))


def paired_cells(mine: dict, theirs: dict) -> list[str]:
    """Two readers' ``long_range.py`` losses on the same masked tokens: every token, the far ones, the near ones and
    far minus near, each a paired difference ± its standard error (negative: ``mine`` better)."""
    return [f"{difference:+.3f} ± {error:.3f}" for difference, error in
            (every_token(mine, theirs), paired_loss(mine, theirs, True), paired_loss(mine, theirs, False),
             paired_loss(mine, theirs))]


def versus_chunks(name: str) -> list[str]:
    """After pretraining, against its chunks (:func:`control_of`): :func:`paired_cells`."""
    mine, chunks = long_range_pair(name)
    return paired_cells(mine, chunks) if mine and chunks else ["not run"] * 4


def same_training_rows() -> list[list[str]]:
    """Each memory added to the chunks and its :func:`without_memory`, with their :func:`paired_cells`."""
    pairs = [(name, twin) for name in BLOCK_ROWS if (twin := without_memory(name))]
    results = [(name, twin, read_result("long_range", f"{name}@mlm"), read_result("long_range", f"{twin}@mlm"))
               for name, twin in pairs]
    return [[f"`{name}`", f"`{twin}`", *paired_cells(mine, theirs)] for name, twin, mine, theirs in results
            if mine and theirs]


def same_training_table() -> str:
    """Each memory added to the chunks against :func:`without_memory`, on the same masked tokens after pretraining."""
    header = ["row", "the same training without the memory", "every token", "far tokens", "near tokens",
              "far minus near"]
    return ("What a memory added to the chunks buys in the same training: its row against the blocks alone continued "
            "from the same model, at the same length, on the same pieces and batches (paired per-token difference ± "
            "its standard error, negative: the memory better).\n\n"
            + markdown_table(header, table_rows("blocks_same_training", same_training_rows)))


def masked_lm_table() -> str:
    header = ["row", *STAGE_TITLES.values(), "memory off, after pretraining", "vs the chunks: every token",
              "far tokens", "near tokens", "far minus near", "gates after pretraining: mean [range] from start"]
    body = table_rows("blocks_masked_lm", lambda: measured([
        [f"`{name}`: {ROWS[name].what}",
         *(number(mlm(name, stage)) if applies(ROWS[name], stage) else "-" for stage in STAGE_TITLES),
         number(mlm(name, "mlm", "loss_window_alone")), *versus_chunks(name), gates_cell(name)]
        for name in [*CHUNK_ROWS, *BLOCK_ROWS]]))
    before = dict(table_rows("blocks_before_training", lambda: [["blocks", mlm(CHUNKS, "extend")],
                                                                ["chunks", mlm("sdpa-512", "head")]]))
    return ("Held-out masked-LM loss (nats a masked token) at 2,048 tokens, the same 4,880 masked tokens for every "
            "row, framed ([CLS]/[SEP] at every block's edges) but for the `-plain` rows; before any training the "
            f"blocks alone are MiniLM's chunks exactly ({number(before.get('blocks'), 4)} against "
            f"{number(before.get('chunks'), 4)}). Against the chunks: the paired per-token difference from "
            f"`{CHUNKS}` after the same pretraining (for the rows of the steps lever: from the chunks pretrained with "
            "the same steps and seed; from the same MLM head, a `-rerun` of the chunks where theirs was an earlier "
            "one; for a row that continues another's pretrained model, `-then-`: from the chunks continued from it the "
            "same steps, and those from the model they continued), ± its standard error.\n\n"
            + markdown_table(header, body))


def representations_table() -> str:
    header = ["reader, after pretraining", "probe: accuracy, % (vs chunks)", "retrieval at 2,048: recall@1, % "
              "(vs chunks)", "retrieval at 8,192: recall@1, % (vs chunks)"]
    return ("Frozen encoders, framed, as the representations table reads them; in brackets the paired difference "
            "from the chunks after the same pretraining; readers not measured are left out.\n\n"
            + markdown_table(header, table_rows("blocks_representations", representations_rows)))


def representations_rows() -> list[list[str]]:
    """Each block and chunks row's probe and retrieval after pretraining (and a memory's alone) against its
    chunks' (:func:`control_of`), the readers measured."""
    readers = [(name, "@mlm") for name in [*CHUNK_ROWS, *BLOCK_ROWS]] + [(name, "@mlm-window-alone")
                                                                          for name in BLOCK_ROWS]
    return measured([[f"`{name}{stage}`",
                      *(share_cell(representation(name + stage, length), measure, value,
                                   representation(f"{control_of(name)}@mlm", length))
                        for measure, value, length in [("probe", "accuracy", 2048),
                                                       ("retrieval", "recall_at_1", 2048),
                                                       ("retrieval", "recall_at_1", 8192)])]
                     for name, stage in readers])


def below_chunks(name: str) -> str:
    """The loss target: below the chunks' by at least two paired standard errors."""
    mine, chunks = long_range_pair(name)
    if not mine or not chunks:
        return "not run"
    difference, error = every_token(mine, chunks)
    return f"{'met' if difference <= -2 * error else '**missed**'} ({difference:+.3f}, 2 s.e. {2 * error:.3f})"


def far_gain(name: str) -> str:
    """The far words gain more than the near ones (far minus near below zero)."""
    mine, chunks = long_range_pair(name)
    if not mine or not chunks:
        return "not run"
    difference, error = paired_loss(mine, chunks)
    return f"{'met' if difference < 0 else '**missed**'} ({difference:+.3f} ± {error:.3f})"


def retrieval_target(name: str, length: int) -> str:
    mine, chunks = representation(f"{name}@mlm", length), representation(f"{control_of(name)}@mlm", length)
    if not mine or not chunks or "retrieval" not in mine or "retrieval" not in chunks:
        return "not run"
    return target(100 * mine["retrieval"]["recall_at_1"], 100 * chunks["retrieval"]["recall_at_1"],
                  lambda v, b: v >= b)


def cost_of(name: str) -> str:
    """Row ``name``'s CPU training step at 8,192 tokens over the chunks', measured on the row of the same architecture
    (``cost.py --blocks``: the cost does not depend on the weights, so a lever of the pretraining shares its row's),
    and where ``cost.py --fast_paths`` timed it, on its fast path too (over the exact chunks of the same rounds)."""
    measured = next((other for other in BLOCK_COST_ROWS if ROWS[other].settings == ROWS[name].settings
                     and ROWS[other].attention == ROWS[name].attention), None)
    if measured is None:
        return target(None, 1.5, None)
    exact = target(cost_ratio(measured, "8192_no_attention_dropout_blocks", CHUNKS), 1.5, lambda v, b: v <= b)
    fast = cost_ratio(f"{measured} auto", "8192_no_attention_dropout_fast_paths", CHUNKS)
    return exact if fast is None else f"{exact}; fast path: {target(fast, 1.5, lambda v, b: v <= b)}"


def gates_moved(name: str) -> str:
    """The gates measurably away from their start: the logit moved by more than 0.1 on average."""
    weights = [w for layer in mlm(name, "mlm", "mechanism_weights") or [] if layer for w in layer]
    if not weights:
        return "not run"
    start = start_of(ROWS[name])
    logit = lambda w: math.log(w / (1 - w))  # noqa: E731
    moved = sum(abs(logit(w) - logit(start)) for w in weights) / len(weights)
    return f"{'met' if moved > 0.1 else '**missed**'} (logit moved {moved:.2f} on average)"


def summary_table() -> str:
    header = ["block row", "MLM loss < chunks' by 2 s.e.", "far words gain more", "retrieval at 2,048 >= chunks'",
              "retrieval at 8,192 >= chunks'", "gates away from start", "CPU step at 8,192 <= 1.5x chunks'"]
    body = table_rows("blocks_targets", lambda: measured([
        [f"`{name}`", below_chunks(name), far_gain(name), retrieval_target(name, 2048), retrieval_target(name, 8192),
         gates_moved(name), cost_of(name)] for name in BLOCK_ROWS], always=1))
    return ("Each block row against issue 33's targets, after the same pretraining as the chunks (value vs bound). "
            "The GPU's cost targets are on the results page (`hf-effattn bench`, 16,384 tokens a step).\n\n"
            + markdown_table(header, body))


def kernel_memory_text() -> str:
    """Kerformer's memory built another way against the study's own row, after the same pretraining: over every
    key (``kernel_memory.py``), or normalised on its own and mixed by its gate (the ``-gated`` rows)."""
    lines = [row[0] for row in table_rows("blocks_kernel_memory", kernel_memory_lines)]
    return "\n".join(lines) or "Kerformer's memory built another way: not run."


def kernel_memory_lines() -> list[list[str]]:
    """:func:`kernel_memory_text`'s lines, one a row."""
    lines = []
    for name in REMADE_ROWS:
        default, every_key = read_result("masked_lm", f"{name}_mlm"), read_result(ALL_KEYS, name)
        if default and every_key:
            lines.append(f"- `{name}`: the memory over the other blocks (the default) {default['loss']:.4f} nats after "
                         f"the same pretraining, over every key (each block's own counted twice) "
                         f"{every_key['loss']:.4f}.")
    lines += [gated_text(name, twin) for name in BLOCK_ROWS if (twin := shared_twin(name))
              and mlm(name, "mlm") is not None and mlm(twin, "mlm") is not None]
    return [[line] for line in lines]


def gated_text(name: str, shared: str) -> str:
    """Gated row ``name`` against ``shared``, its :func:`shared_twin`, before and after the same pretraining, and the
    paired per-token difference after it."""
    mine, theirs = read_result("long_range", f"{name}@mlm"), read_result("long_range", f"{shared}@mlm")
    paired = "" if not mine or not theirs else " (%+.3f ± %.3f a token)" % every_token(mine, theirs)
    return (f"- `{name}`, the memory normalised on its own and mixed per head by a gate from "
            f"{start_of(ROWS[name]):g}: {mlm(name, 'extend'):.4f} nats before any training (the chunked reader "
            f"{mlm(CHUNKS, 'extend'):.4f}), {mlm(name, 'mlm'):.4f} after the pretraining against the shared "
            f"normaliser's {mlm(shared, 'mlm'):.4f} (`{shared}`){paired}.")


def memory_mass_rows() -> list[list[str]]:
    """Kerformer's memory share at 2,048 and 8,192 tokens and its retrieval at 8,192 as trained, with the memory off
    and with the memory's mass held (``memory_mass.py``), each against the chunks of its seed."""
    body = []
    for name, result in ((name, read_result("memory_mass", name)) for name in BLOCK_ROWS):
        if result:
            chunks = representation(f"{control_of(name)}@mlm", 8192)
            shares = [f"{100 * sum(v) / len(v):.0f} % [{100 * min(v):.0f}-{100 * max(v):.0f}]"
                      for v in result["share"].values()]
            readings = [representation(f"{name}@mlm{part}", 8192) for part in ("", "-window-alone")]
            held = {"reader": "held", "retrieval": result["retrieval_held"]} if result["retrieval_held"] else None
            body.append([f"`{name}`", *shares, *(share_cell(reading, "retrieval", "recall_at_1", chunks)
                                                 for reading in readings),
                         share_cell(held, "retrieval", "recall_at_1", chunks) if held else "- (its pretraining's)",
                         share_cell(chunks, "retrieval", "recall_at_1")])
    return body


def memory_mass_table() -> str:
    header = ["row", "memory share at 2,048: mean [layers]", "at 8,192", "retrieval at 8,192: as trained",
              "memory off", "memory held", "the chunks"]
    return ("A kernelized memory's share of its queries' attention (mean over heads, tokens and 8 documents, per "
            "layer) and retrieval at 8,192 with each gate's odds times the other blocks in its pretraining over those "
            f"at 8,192 ({memory_mass.held_factor(ROWS[CHUNKS]):.1f} for a row pretrained at 2,048; a row pretrained "
            "at 8,192 holds its own mass) (`memory_mass.py`); in brackets the paired difference from the chunks."
            "\n\n" + markdown_table(header, table_rows("blocks_memory_mass", memory_mass_rows)))


def plot(path: Path) -> None:
    """Each chunks and block row's masked-LM loss after pretraining, lowest first, the chunks' rows in grey."""
    losses = sorted((loss, name) for name in [*CHUNK_ROWS, *BLOCK_ROWS] if (loss := mlm(name, "mlm")) is not None)
    figure, axes = figure_and_axes((8, 1.5 + 0.18 * len(losses)))
    for index, (loss, name) in enumerate(losses):
        axes.plot([loss], [index], marker="o", color="grey" if name in CHUNK_ROWS else "C0")
    axes.set_yticks(range(len(losses)), [name for _, name in losses], fontsize=7)
    axes.invert_yaxis()
    axes.set_xlabel("held-out masked-LM loss after pretraining, nats (grey: the chunks alone)")
    save_figure(figure, axes, path)


def main() -> None:
    publish("blocks", "\n\n".join(part for part in [
        not_run(), "### Masked-LM loss", masked_lm_table(), "### Probe and retrieval", representations_table(),
        "### Against the targets", summary_table(), "### The memory against the same training without it",
        same_training_table(), "### Where the gate starts", gate_start_table(),
        "### Kerformer's memory built otherwise", kernel_memory_text(),
        "### The memory's mass at 8,192", memory_mass_table(),
    ] if part), plot)


if __name__ == "__main__":
    main()
