#!/usr/bin/env python
"""The long-document benchmark's tables and plots, from the results that ``pretrain.py``, ``represent.py`` and
``cost.py`` saved: ``results/masked_lm.md``, ``results/representations.md``, ``results/cost.md`` and
``results/summary.md`` (each row against the issue's targets), with ``results/masked_lm.png`` and
``results/tradeoff.png``. A result not yet measured reads "not run".

    python benchmarks/long_documents/tables.py
"""

from __future__ import annotations

import math
from pathlib import Path

from common import LONG, RESULTS, ROWS, figure_and_axes, markdown_table, read_result, save_figure

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
    head, control = mlm("sdpa-512", "head"), mlm("sdpa-512", "mlm_512")
    intro = (f"MiniLM at 512 tokens, each 512-token chunk predicted from itself (the head trained alone): "
             f"**{number(head)}**; after the same masked-LM pretraining at 512 (blocks of 512, as many steps and "
             f"tokens as every row): **{number(control)}**.")
    header = ["row at 2,048", *STAGE_TITLES.values(), "after pretraining, mechanism switched off"]
    body = [[f"`{name}` ({row.what})", *(number(mlm(name, stage)) for stage in STAGE_TITLES),
             number(mlm(name, "mlm", "loss_window_alone")) if row.hybrid else "-"] for name, row in ROWS.items()]
    return intro + "\n\n" + markdown_table(header, body)


def representation(reader: str, length: int = LONG) -> dict | None:
    return read_result("representations", f"{reader}_{length}")


def readers() -> dict[str, str]:
    """Every reader of the representations table, and its label."""
    rows = {f"{name}@mlm": f"`{name}` after pretraining ({row.what})" for name, row in ROWS.items()}
    hybrids = {f"{name}@mlm-window-alone": f"`{name}` after pretraining, mechanism switched off"
               for name, row in ROWS.items() if row.hybrid}
    return {**BASELINE_READERS, "sdpa@extend": "`sdpa` at 2,048 before pretraining (copied positions)", **rows,
            **hybrids}


def share_cell(result: dict | None, measure: str, key: str, versus: dict | None = None) -> str:
    """``mean ± s.e.`` in percent, and, against ``versus`` (the chunked reader), the paired difference and its s.e."""
    if result is None or measure not in result:
        return "not run"
    mine = result[measure]
    cell = f"{100 * mine[key]:.1f} ± {100 * mine['standard_error']:.1f}"
    if versus and measure in versus and versus is not result:
        difference, error = paired_difference(mine, versus[measure])
        cell += f" ({100 * difference:+.1f} ± {100 * error:.1f})"
    return cell


def paired_difference(mine: dict, theirs: dict) -> tuple[float, float]:
    """The mean difference of two readers' per-item outcomes (correct / hit) on the same items, and its s.e."""
    per_item = "correct" if "correct" in mine else "hits"
    differences = [a - b for a, b in zip(mine[per_item], theirs[per_item])]
    mean = sum(differences) / len(differences)
    variance = sum((d - mean) ** 2 for d in differences) / max(len(differences) - 1, 1)
    return mean, math.sqrt(variance / len(differences))


def representations_table() -> str:
    chunked, chunked_long = representation(CHUNKED), representation(CHUNKED, 8192)
    header = ["reader", "probe: accuracy, % (vs chunks)", "retrieval at 2,048: recall@1, % (vs chunks)",
              "retrieval at 8,192: recall@1, % (vs chunks)"]
    body = [[label, share_cell(representation(name), "probe", "accuracy", chunked),
             share_cell(representation(name), "retrieval", "recall_at_1", chunked),
             share_cell(representation(name, 8192), "retrieval", "recall_at_1", chunked_long)]
            for name, label in readers().items()]
    result = representation(CHUNKED) or {}
    sizes = (f"{result['probe']['documents']} documents of {result['probe']['labels']} subsystems"
             if "probe" in result else "the documents of every subsystem with at least 10")
    return (f"Frozen encoders, mean-pooled last hidden state; the probe over {sizes} in 10-fold cross-validation; "
            "the retrieval passage copied from deep inside each document (tokens 1,100-1,900 at 2,048, 4,000-8,000 "
            "at 8,192) must find it among all of them. Mean ± binomial standard error; in brackets the paired "
            "difference from MiniLM over 512-token chunks, ± its standard error.\n\n" + markdown_table(header, body))


def cost_cell(name: str, length: int, key: str) -> str:
    result = read_result("cost", str(length))
    if result is None or name not in result["steps"]:
        return "not run"
    mine, softmax = result["steps"][name][key], result["steps"].get("sdpa", {}).get(key)
    return f"{mine / softmax:.2f}x" if softmax else f"{mine:.1f}"


def cost_table() -> str:
    measured = read_result("cost", str(LONG))
    names = list(measured["steps"]) if measured else list(ROWS)
    header = ["row", "step time at 2,048 (x sdpa)", "peak memory at 2,048 (x sdpa)", "step time at 8,192 (x sdpa)",
              "peak memory at 8,192 (x sdpa)"]
    body = [[f"`{name}`", cost_cell(name, LONG, "step_seconds"), cost_cell(name, LONG, "peak_mib"),
             cost_cell(name, 8192, "step_seconds"), cost_cell(name, 8192, "peak_mib")] for name in names]
    note = ""
    if measured and "sdpa" in measured["steps"]:
        note = (f" `sdpa` itself: {measured['steps']['sdpa']['step_seconds']:.1f} s and "
                f"{measured['steps']['sdpa']['peak_mib'] / 1024:.1f} GiB at 2,048 ({measured['threads']} thread).")
    sparse = read_result("cost", f"masked_lm_{LONG}")
    masked = ""
    if sparse:
        pairs = sorted({name.rsplit(" ", 1)[0] for name in sparse["steps"]})
        masked = "\n\nMasked-LM step at 2,048 with the logits at every token (dense) or only at the masked ones " \
                 "(sparse, what `run_mlm.py` does):\n\n" + markdown_table(
                     ["row", "dense: s / step", "sparse: s / step", "sparse / dense"],
                     [[f"`{name}`", f"{sparse['steps'][name + ' dense']['step_seconds']:.2f}",
                       f"{sparse['steps'][name + ' sparse']['step_seconds']:.2f}",
                       f"{sparse['steps'][name + ' sparse']['step_seconds'] / sparse['steps'][name + ' dense']['step_seconds']:.2f}x"]
                      for name in pairs])
    return ("One training step (forward, backward, AdamW; batch 1; one thread; rows taking turns), relative to "
            "`sdpa` at the same length." + note + "\n\n" + markdown_table(header, body) + masked)


def plot_masked_lm(path: Path) -> None:
    figure, axes = figure_and_axes()
    for index, (name, row) in enumerate(ROWS.items()):
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


def publish(name: str, text: str, plot=None) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{name}.md").write_text(text + "\n")
    if plot:
        plot(RESULTS / f"{name}.png")
    print(text + "\n")


def main() -> None:
    publish("masked_lm", masked_lm_table(), plot_masked_lm)
    publish("representations", representations_table())
    publish("cost", cost_table())
    figure_path = RESULTS / "tradeoff.png"
    plot_tradeoff(figure_path)


if __name__ == "__main__":
    main()
