"""The results of ``run_masked_lm.py`` (``results/masked_lm/<row>.json``) as its Markdown table and its figure: the
held-out MLM loss of each attention at 2,048 tokens after each stage, against MiniLM's at 512 (the reference) and
after the same masked-LM pretraining at 512 (the control)."""

from __future__ import annotations

from pathlib import Path

from common import LONG, MECHANISMS, figure_and_axes, markdown_table, read_result, save_figure

KIND = "masked_lm"
STAGE_NAMES = {"extend": "after extension", "transfer": "after long transfer", "mlm": "after MLM pretraining",
               "mlm_more": "after more MLM pretraining"}


def loss_cell(row: str) -> str:
    result = read_result(KIND, row)
    if not result:
        return "not run"
    if "transfer" in result:
        before, after = result["transfer"]["hidden_cosine_before"], result["transfer"]["hidden_cosine_after"]
        steps, rate = result["transfer"]["steps"], result["transfer"]["learning_rate"]
        rate = f"{rate:.0e}".replace("e-0", "e-")  # 3e-3
        return f"{result['loss']:.3f} ({steps} steps, lr {rate}, cosine {before:.2f} -> {after:.2f})"
    if "tokens_trained" in result:
        return f"{result['loss']:.3f} ({result['tokens_trained'] / 1000:,.0f}k tokens)"
    return f"{result['loss']:.3f}"


def stages_run() -> dict[str, str]:
    """The stages (and their column titles) that some attention has a result for."""
    return {stage: name for stage, name in STAGE_NAMES.items()
            if any(read_result(KIND, f"{attention}_{LONG}_{stage}") for attention in ("sdpa", *MECHANISMS))}


def table() -> str:
    reference = read_result(KIND, "sdpa_512")
    stages = stages_run()
    header = ["attention at 2,048", *stages.values()]
    body = [["`sdpa` (copied positions)", loss_cell(f"sdpa_{LONG}_extend"), *["-"] * (len(stages) - 1)]]
    body += [[f"`{attention}`", *(loss_cell(f"{attention}_{LONG}_{stage}") for stage in stages)]
             for attention in MECHANISMS]
    intro = f"MLM loss at 512 of MiniLM (`sdpa`, head trained alone): {loss_cell('sdpa_512')}"
    if reference:
        intro += f" (before the head was trained: {reference['head']['heldout_loss_before']:.3f})"
    if read_result(KIND, "sdpa_512_mlm"):
        intro += (f"; after the same masked-LM pretraining at 512 (`sdpa`, blocks of 512, as many steps and tokens "
                  f"as the mechanisms'): {loss_cell('sdpa_512_mlm')}")
    return intro + "\n\n" + markdown_table(header, body)


def plot(path: Path) -> None:
    figure, axes = figure_and_axes()
    stages = stages_run()
    for attention in ("sdpa", *MECHANISMS):
        points = [(i, read_result(KIND, f"{attention}_{LONG}_{stage}")) for i, stage in enumerate(stages)]
        points = [(i, r["loss"]) for i, r in points if r]
        if points:
            axes.plot(*zip(*points), marker="o", label=f"{attention} @ {LONG}")
    reference = read_result(KIND, "sdpa_512")
    if reference:
        axes.axhline(reference["loss"], color="black", linestyle="--", label="sdpa @ 512 (reference)")
    control = read_result(KIND, "sdpa_512_mlm")
    if control:
        axes.axhline(control["loss"], color="grey", linestyle=":", label="sdpa @ 512 after the same MLM (control)")
    axes.set_xticks(range(len(stages)), [name.replace("after ", "").replace(" pretraining", "")
                                         for name in stages.values()])
    axes.set_ylabel("held-out MLM loss (nats / masked token)")
    save_figure(figure, axes, path)
