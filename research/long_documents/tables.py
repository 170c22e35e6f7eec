#!/usr/bin/env python
"""The long-document benchmark's tables and plots, from the results that ``pretrain.py``, ``represent.py`` and
``cost.py`` saved: ``results/masked_lm.md``, ``results/representations.md``, ``results/cost.md``,
``results/long_range.md`` (the masked words only long context can see), ``results/summary.md`` (each hybrid against
its targets) and ``results/classification.md`` (fine-tuning, on a GPU); the cost tables are ``cost_tables.py``'s,
with ``results/masked_lm.png`` and ``results/tradeoff.png``. A result not yet measured reads "not run". Each table's
rows are kept in ``tables/<name>.jsonl``, which a machine without the per-run results reads instead
(``table_files.py``).

    python research/long_documents/tables.py
"""

from __future__ import annotations

import math
from pathlib import Path

from build_corpus import PROBE_MIN_TOKENS
from cost_tables import GPU_COSTS, NO_DROPOUT, cost_ratio, cost_table
from pretrain import applies
from rows import LONG, ROWS
import runs
from runs import read_result
from table_files import figure_and_axes, markdown_table, mean_and_error, measured_here, publish, save_figure, \
    table_rows

STAGE_TITLES = {"extend": "after extension", "transfer": "after long transfer", "mlm": "after masked-LM pretraining"}
CHUNKED, TRUNCATED = "sdpa-512-chunks", "sdpa-512"
BASELINE_READERS = {TRUNCATED: "`sdpa` at 512, truncated", CHUNKED: "`sdpa` at 512, over 512-token chunks",
                    f"{CHUNKED}@mlm": "`sdpa` at 512 over chunks, after the same masked-LM pretraining"}


def number(value: float | None, digits: int = 3) -> str:
    return "not run" if value is None else f"{value:.{digits}f}"


def mlm(row: str, stage: str, key: str = "loss") -> float | None:
    result = read_result("masked_lm", f"{row}_{stage}")
    return None if result is None else result.get(key)


def masked_lm_table() -> str:
    chunks = dict(table_rows("masked_lm_chunks", lambda: [[stage, mlm("sdpa-512", stage)]
                                                          for stage in ("head", "mlm_512")]))
    intro = (f"MiniLM at 512 tokens, each 512-token chunk predicted from itself (the head trained alone): "
             f"**{number(chunks.get('head'))}**; after the same masked-LM pretraining at 512 (blocks of 512, as many "
             f"steps and tokens as every row): **{number(chunks.get('mlm_512'))}**.")
    header = ["row at 2,048", *STAGE_TITLES.values(), "after pretraining, mechanism switched off"]
    body = table_rows("masked_lm", lambda: [
        [f"`{name}`: {row.what}", *(number(mlm(name, stage)) if applies(row, stage) else "-" for stage in STAGE_TITLES),
         number(mlm(name, "mlm", "loss_window_alone")) if row.hybrid else "-"]
        for name, row in ROWS.items() if not row.block])  # the block rows: block_tables.py
    return intro + "\n\n" + markdown_table(header, body)


def representation(reader: str, length: int = LONG, probe_from: int = LONG) -> dict | None:
    """``represent.py``'s result for ``reader`` at ``length``; with ``probe_from`` below ``LONG``, its probe over the
    documents of that many word-pieces or more."""
    return read_result("representations", f"{reader}_{length}" + (f"_probe{probe_from}" if probe_from < LONG else ""))


def readers() -> dict[str, str]:
    """Every reader of the representations table, and its label."""
    rows = {f"{name}@mlm": f"`{name}` after pretraining: {row.what}" for name, row in ROWS.items() if not row.block}
    hybrids = {f"{name}@mlm-window-alone": f"`{name}` after pretraining, mechanism switched off"
               for name, row in ROWS.items() if row.hybrid and not row.block}
    return {**BASELINE_READERS, "sdpa@extend": "`sdpa` at 2,048 before pretraining (copied positions)", **rows,
            **hybrids}


def share_cell(result: dict | None, measure: str, key: str, versus: dict | None = None) -> str:
    """``mean ± s.e.`` in percent, and, against ``versus`` (the chunked reader), the paired difference and its s.e."""
    if result is None or measure not in result:
        return "not run"
    mine = result[measure]
    cell = f"{100 * mine[key]:.1f} ± {100 * mine['standard_error']:.1f}"
    if versus and measure in versus and versus["reader"] != result["reader"]:
        difference, error = paired_difference(mine, versus[measure])
        cell += f" ({100 * difference:+.1f} ± {100 * error:.1f})"
    return cell


def paired_difference(mine: dict, theirs: dict) -> tuple[float, float]:
    """The mean difference of two readers' per-item outcomes (correct / hit) on the same items, and its s.e."""
    per_item = "correct" if "correct" in mine else "hits"
    return mean_and_error([a - b for a, b in zip(mine[per_item], theirs[per_item])])


def probe_size(result: dict | None, fallback: str) -> str:
    """How many documents and subsystems ``result``'s probe read, or ``fallback`` where it is missing."""
    result = result or {}
    return (f"{result['probe']['documents']:,} documents of {result['probe']['labels']} subsystems"
            if "probe" in result else fallback)


def representations_rows() -> list[list[str]]:
    """The representations table's rows: each reader's probe and retrieval (:func:`share_cell`) against the chunks'."""
    chunked, chunked_long = representation(CHUNKED), representation(CHUNKED, 8192)
    chunked_more = representation(CHUNKED, probe_from=PROBE_MIN_TOKENS)
    return [[label, share_cell(representation(name), "probe", "accuracy", chunked),
             share_cell(representation(name, probe_from=PROBE_MIN_TOKENS), "probe", "accuracy", chunked_more),
             share_cell(representation(name), "retrieval", "recall_at_1", chunked),
             share_cell(representation(name, 8192), "retrieval", "recall_at_1", chunked_long)]
            for name, label in readers().items()]


def representations_table() -> str:
    header = ["reader", "probe: accuracy, % (vs chunks)", f"probe, {PROBE_MIN_TOKENS:,}+ tokens: accuracy, % (vs "
              "chunks)", "retrieval at 2,048: recall@1, % (vs chunks)", "retrieval at 8,192: recall@1, % (vs chunks)"]
    sizes = dict(table_rows("representations_probes", lambda: [
        ["all", probe_size(representation(CHUNKED), "the documents of every subsystem with at least 10")],
        ["more", probe_size(representation(CHUNKED, probe_from=PROBE_MIN_TOKENS), "the documents")]]))
    return (f"Frozen encoders, mean-pooled last hidden state; the probe over {sizes.get('all')} of 2,048 word-pieces "
            f"or more (the second probe column over {sizes.get('more')} of {PROBE_MIN_TOKENS:,} or more, each "
            "subsystem with at least 10 such; the shorter ones read whole) in 10-fold cross-validation; "
            "the retrieval passage copied from deep inside each document (tokens 1,100-1,900 at 2,048, 4,000-8,000 "
            "at 8,192) must find it among all of them. Mean ± binomial standard error; in brackets the paired "
            "difference from MiniLM over 512-token chunks, ± its standard error.\n\n"
            + markdown_table(header, table_rows("representations", representations_rows)))


def paired_loss(mine: dict, theirs: dict, far: bool | None = None) -> tuple[float, float]:
    """The mean per-token loss difference of two long-range readers on the same far (``far=True``) or near
    (``False``) tokens, and its s.e.; with ``far=None``, how much more the far tokens gain than the near ones (the
    difference of the two differences: below zero where the reader uses what lies outside the chunk)."""
    if far is None:
        (on_far, far_error), (on_near, near_error) = paired_loss(mine, theirs, True), paired_loss(mine, theirs, False)
        return on_far - on_near, math.hypot(far_error, near_error)
    return mean_and_error([a - b for a, b, is_far in zip(mine["losses"], theirs["losses"], mine["far"])
                           if is_far == far])


def loss_cells(mine: dict, theirs: dict | None) -> list[str]:
    """Far tokens, near tokens, and far against near: the loss, each with the paired difference from ``theirs``."""
    cells = [f"{mine['loss_far']:.3f}", f"{mine['loss_near']:.3f}", "-"]
    if theirs and theirs["reader"] != mine["reader"]:
        for index, far in enumerate((True, False, None)):
            difference, error = paired_loss(mine, theirs, far)
            cells[index] = f"{difference:+.3f} ± {error:.3f}" if far is None else \
                f"{cells[index]} ({difference:+.3f} ± {error:.3f})"
    return cells


def long_range_results() -> dict[str, dict]:
    """``long_range.py``'s results of every reader but the block rows', softmax first."""
    folder = runs.RESULTS / "long_range"
    names = sorted((path.stem for path in folder.glob("*.json") if not is_block_reader(path.stem))
                   if folder.is_dir() else [], key=lambda name: (not name.startswith("sdpa"), name))
    return {name: read_result("long_range", name) for name in names}


def versus_chunks_rows() -> list[list[str]]:
    """Each reader's far and near losses against the chunks at the same stage (:func:`loss_cells`)."""
    results = long_range_results()
    before, after = results.get(TRUNCATED), results.get(f"{TRUNCATED}@mlm_512")
    return [[f"`{name}`", f"{mine['length']:,}", *loss_cells(mine, after if "mlm" in name else before)]
            for name, mine in results.items()]


def versus_window_rows() -> list[list[str]]:
    """Each hybrid's far and near losses, its mechanism switched on against off (:func:`loss_cells`)."""
    results = long_range_results()
    return [[f"`{name}`", *loss_cells(results[name], results[f"{name}-window-alone"])]
            for name in results if f"{name}-window-alone" in results]


def token_counts() -> list[list]:
    """How many of the held-out masked tokens are far, and how many there are (the same for every reader)."""
    some = next(iter(long_range_results().values()))
    return [[kind, some[kind]] for kind in ("far_tokens", "masked_tokens")]


def long_range_table() -> str:
    """Per reader, the loss on the far masked tokens (word last seen outside its chunk) and on the others, against
    the chunks at the same stage (MiniLM's chunks before pretraining, the chunked control after it); per hybrid, its
    mechanism switched on against off."""
    versus_chunks = table_rows("long_range", versus_chunks_rows)
    if not versus_chunks:
        return "Long-range masked-LM loss (`long_range.py`): not run."
    tokens = dict(table_rows("long_range_tokens", token_counts))
    versus_window = table_rows("long_range_mechanism", versus_window_rows)
    columns = ["far tokens: loss (difference)", "near tokens: loss (difference)", "far minus near difference"]
    text = (f"The held-out masked tokens of the masked-LM table, split: {tokens['far_tokens']:,} of "
            f"{tokens['masked_tokens']:,} are *far* (their word occurs unmasked earlier in the document but not "
            "earlier in its own 510-token chunk: only a reader of the whole document can see it), the others *near*. "
            "Loss in nats; in brackets the paired difference from the 512-token chunks on the same tokens (MiniLM's "
            "for readers before pretraining, the chunked control's for readers after it), ± its standard error; "
            "negative is better than the chunks. The last column, how much more the far tokens gain than the near "
            "ones, is below zero where a reader uses what lies outside the chunk.\n\n"
            + markdown_table(["reader", "length", *columns], versus_chunks))
    if versus_window:
        text += ("\n\nWhat each hybrid's mechanism buys: the same, the mechanism switched on against off (the window "
                 "alone) in the same pretrained model.\n\n"
                 + markdown_table(["hybrid after pretraining", *columns], versus_window))
    return text


def is_block_reader(name: str) -> bool:
    """Whether reader ``name`` is a block row's (their tables: block_tables.py)."""
    row = ROWS.get(name.partition("@")[0])
    return bool(row and row.block)


def plot_masked_lm(path: Path) -> None:
    figure, axes = figure_and_axes()
    for index, (name, row) in enumerate((name, row) for name, row in ROWS.items() if not row.block):
        points = [(i, mlm(name, stage)) for i, stage in enumerate(STAGE_TITLES)]
        points = [(i, loss) for i, loss in points if loss is not None]
        if points:
            axes.plot(*zip(*points), marker="o", color=f"C{index % 10}", label=name,
                      linestyle="-" if row.hybrid else "--")
    for stage, style in (("head", "--"), ("mlm_512", ":")):
        if mlm("sdpa-512", stage) is not None:
            axes.axhline(mlm("sdpa-512", stage), color="black", linestyle=style,
                         label=f"sdpa @ 512 chunks ({'head only' if stage == 'head' else 'same pretraining'})")
    axes.set_xticks(range(len(STAGE_TITLES)), [title.replace("after ", "") for title in STAGE_TITLES.values()])
    axes.set_ylabel("held-out masked-LM loss (nats / masked token)")
    save_figure(figure, axes, path)


def plot_tradeoff(path: Path) -> None:
    figure, axes = figure_and_axes()
    cost = read_result("cost", str(LONG))
    for index, name in enumerate(ROWS):
        result = representation(f"{name}@mlm")
        if cost and result and "probe" in result and name in cost["steps"]:
            ratio = cost["steps"][name]["step_seconds"] / cost["steps"]["sdpa"]["step_seconds"]
            axes.errorbar(ratio, 100 * result["probe"]["accuracy"], yerr=100 * result["probe"]["standard_error"],
                          marker="o", color=f"C{index % 10}", capsize=3, label=name)
    chunked = representation(CHUNKED)
    if chunked and "probe" in chunked:
        axes.axhline(100 * chunked["probe"]["accuracy"], color="black", linestyle=":", label="sdpa @ 512 chunks")
    axes.set_xscale("log")
    axes.set_xlabel("training step time at 2,048 (x sdpa)")
    axes.set_ylabel("linear probe accuracy, %")
    save_figure(figure, axes, path)


def target(value: float | None, bound: float | None, holds) -> str:
    """``met``/``missed`` for ``holds(value, bound)``, with the value; "not run" where either is missing."""
    if value is None or bound is None:
        return "not run"
    return f"{'met' if holds(value, bound) else '**missed**'} ({value:.3g} vs {bound:.3g})"


def probe_accuracy(reader: str, probe_from: int = LONG) -> float | None:
    result = representation(reader, probe_from=probe_from)
    return 100 * result["probe"]["accuracy"] if result and "probe" in result else None


def probe_targets(name: str, window: str, probe_from: int = LONG) -> list[str]:
    """Hybrid ``name``'s probe (after pretraining) within 2 points of `sdpa` at 2,048 and not below the chunks' or
    its ``window``'s alone, over the documents of ``probe_from`` word-pieces or more."""
    mine, softmax = probe_accuracy(f"{name}@mlm", probe_from), probe_accuracy("sdpa@mlm", probe_from)
    return [target(mine, softmax and softmax - 2, lambda v, b: v >= b),
            target(mine, probe_accuracy(f"{CHUNKED}@mlm", probe_from), lambda v, b: v >= b),
            target(mine, probe_accuracy(f"{window}@mlm", probe_from), lambda v, b: v >= b)]


def window_of(row) -> str:
    return f"local-w{row.settings['local_window']}"


def summary_rows() -> list[list[str]]:
    """Each hybrid beside a window against the targets: masked-LM loss within 0.05 nats of `sdpa` after the same
    pretraining and below the chunks' and the same window's alone; probe within 2 points of `sdpa` at 2,048 and not
    below the chunks or the window; a third of `sdpa`'s step time at 2,048 and a tenth at 8,192."""
    softmax, chunks = mlm("sdpa", "mlm"), mlm("sdpa-512", "mlm_512")
    body = []
    for name, row in ROWS.items():
        if not row.hybrid or row.block:  # block hybrids have targets of their own: block_tables.py
            continue
        loss, window = mlm(name, "mlm"), window_of(row)
        body.append([f"`{name}`", target(loss, softmax and softmax + 0.05, lambda v, b: v <= b),
                     target(loss, chunks, lambda v, b: v < b), target(loss, mlm(window, "mlm"), lambda v, b: v < b),
                     *probe_targets(name, window),
                     target(cost_ratio(name, str(LONG)), 1 / 3, lambda v, b: v <= b),
                     target(cost_ratio(name, f"{LONG}{NO_DROPOUT}"), 1 / 3, lambda v, b: v <= b),
                     target(cost_ratio(name, f"8192{NO_DROPOUT}"), 1 / 10, lambda v, b: v <= b),
                     *(target(cost_ratio(name, measurement), bound, lambda v, b: v <= b)
                       for measurement, bound in zip(GPU_COSTS, (1 / 3, 1 / 10)))])
    return body


def summary_table() -> str:
    header = ["hybrid", "MLM loss <= sdpa + 0.05", "MLM loss < chunks'", "MLM loss < window's",
              "probe >= sdpa - 2", "probe >= chunks'", "probe >= window's", "step <= 1/3 sdpa @ 2,048",
              "the same, no attention dropout", "step <= 1/10 sdpa @ 8,192, no attention dropout",
              "step <= 1/3 sdpa @ 2,048, GPU", "step <= 1/10 sdpa @ 8,192, GPU"]
    body = table_rows("summary", summary_rows)
    more = table_rows("summary_longer_documents", lambda: [
        [f"`{name}`", *probe_targets(name, window_of(row), PROBE_MIN_TOKENS)] for name, row in ROWS.items()
        if row.hybrid and not row.block and probe_accuracy(f"{name}@mlm", PROBE_MIN_TOKENS)])
    return ("Each hybrid, after the same transfer and masked-LM pretraining as every row, against the targets "
            "(value vs bound; probe in %; step time as a share of `sdpa`'s at the same length).\n\n"
            + markdown_table(header, body)
            + (f"\n\nThe probe's targets over the documents of {PROBE_MIN_TOKENS:,} word-pieces or more (the "
               "representations table's second probe column, a smaller standard error), where measured:\n\n"
               + markdown_table(["hybrid", "probe >= sdpa - 2", "probe >= chunks'", "probe >= window's"], more)
               if more else ""))


def finetuned_rows() -> list[list[str]]:
    """Fine-tuning accuracy per model (``run_classification.py``, a GPU measurement), mean ± s.e. over seeds."""
    accuracies = {}
    folder = runs.RESULTS / "classification"
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        result = read_result("classification", path.stem)
        accuracies.setdefault(f"{result['model']} at {result['length']:,}", []).append(
            100 * result["test"]["accuracy"])
    return [[f"`{name}`", f"{mean_and_error(values)[0]:.1f} ± {mean_and_error(values)[1]:.1f} ({len(values)})"]
            for name, values in accuracies.items()]


def finetuned_table() -> str:
    rows = table_rows("classification", finetuned_rows)
    if not rows:
        return "Fine-tuning (`run_classification.py`, a GPU measurement): not run."
    return markdown_table(["model", "test accuracy, % (mean ± s.e., seeds)"], rows)


def main() -> None:
    publish("masked_lm", masked_lm_table(), plot_masked_lm)
    publish("representations", representations_table())
    publish("long_range", long_range_table())
    publish("cost", cost_table())
    publish("summary", summary_table())
    publish("classification", finetuned_table())
    if measured_here():
        plot_tradeoff(runs.RESULTS / "tradeoff.png")


if __name__ == "__main__":
    main()
