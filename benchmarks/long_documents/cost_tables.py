"""The long-document benchmark's cost tables (``results/cost.md``, written by ``tables.py``), from what
``cost.py`` saved: each row's training step time and peak memory as multiples of `sdpa`'s, on a CPU and, where
measured, on a GPU, and the masked-LM step with dense and sparse logits."""

from __future__ import annotations

from common import LONG, markdown_table, read_result
from rows import ROWS

NO_DROPOUT = "_no_attention_dropout"
COSTS = {str(LONG): "at 2,048", f"{LONG}{NO_DROPOUT}": "at 2,048, no attention dropout",
         f"8192{NO_DROPOUT}": "at 8,192, no attention dropout"}
GPU_COSTS = {f"{LONG}_cuda_bfloat16_batch8": "at 2,048, batch 8", "8192_cuda_bfloat16_batch2": "at 8,192, batch 2"}


def cost_cell(name: str, measurement: str, key: str) -> str:
    """Row ``name``'s ``key`` in cost result ``measurement`` (a key of ``COSTS``), as a multiple of `sdpa`'s."""
    result = read_result("cost", measurement)
    if result is None or name not in result["steps"]:
        return "not run"
    mine, softmax = result["steps"][name][key], result["steps"].get("sdpa", {}).get(key)
    return f"{mine / softmax:.2f}x" if softmax else f"{mine:.1f}"


def sparse_prediction_table() -> str:
    """The masked-LM step with dense and sparse logits, where ``cost.py --masked_lm`` measured it."""
    sparse = read_result("cost", f"masked_lm_{LONG}")
    if not sparse:
        return ""
    rows = []
    for name in sorted({subject.rsplit(" ", 1)[0] for subject in sparse["steps"]}):
        dense, only_masked = (sparse["steps"][f"{name} {kind}"]["step_seconds"] for kind in ("dense", "sparse"))
        rows.append([f"`{name}`", f"{dense:.2f}", f"{only_masked:.2f}", f"{only_masked / dense:.2f}x"])
    return ("\n\nMasked-LM step at 2,048 with the logits at every token (dense) or only at the masked ones (sparse, "
            "what `run_mlm.py` does):\n\n"
            + markdown_table(["row", "dense: s / step", "sparse: s / step", "sparse / dense"], rows))


def relative_cost_table(measurements: dict[str, str]) -> str:
    """Each row's step time and peak memory in each cost result of ``measurements`` (name: title), as multiples of
    `sdpa`'s; the rows of the first result measured (every row where none is)."""
    measured = next(filter(None, map(lambda name: read_result("cost", name), measurements)), None)
    names = list(measured["steps"]) if measured else list(ROWS)
    header = ["row", *(f"{kind} {title}" for title in measurements.values() for kind in ("step time", "peak memory"))]
    body = [[f"`{name}`", *(cost_cell(name, measurement, key) for measurement in measurements
                            for key in ("step_seconds", "peak_mib"))] for name in names]
    return markdown_table(header, body)


def gpu_cost_table() -> str:
    """The same step on a GPU (``cost.py --dtype bfloat16 --batch_size B`` where CUDA is), where it was measured."""
    measured = [read_result("cost", name) for name in GPU_COSTS]
    if not any(measured):
        return ""
    first = next(filter(None, measured))
    softmax = ", ".join(f"{result['steps']['sdpa']['step_seconds'] * 1000:.0f} ms and "
                        f"{result['steps']['sdpa']['peak_mib'] / 1024:.1f} GiB {title}"
                        for result, title in zip(measured, GPU_COSTS.values()) if result)
    tokens = first["batch_size"] * first["length"]
    return (f"\n\nOn a GPU, {first['device']}: the same step under bfloat16 autocast, the document repeated into a "
            f"batch of {tokens:,} tokens, MiniLM's attention dropout, median of {first['repeats']}; MiniLM's "
            "configuration with random weights (the trained checkpoint was not copied to the GPU machine, and the "
            f"cost does not depend on the weights); `sdpa` itself: {softmax}.\n\n" + relative_cost_table(GPU_COSTS))


def cost_table() -> str:
    measured = read_result("cost", str(LONG))
    note = ""
    if measured and "sdpa" in measured["steps"]:
        note = (f" `sdpa` itself: {measured['steps']['sdpa']['step_seconds']:.1f} s and "
                f"{measured['steps']['sdpa']['peak_mib'] / 1024:.1f} GiB at 2,048 ({measured['threads']} thread).")
    note += (" MiniLM trains with dropout on its attention probabilities (0.1), which takes PyTorch's CPU `sdpa` off "
             "its fused kernel onto one that writes the N x N probabilities out; without it `sdpa` runs the fused "
             "kernel, in linear memory, the only way it fits at 8,192 on this machine.")
    return ("One training step (forward, backward, AdamW; batch 1; one thread; rows taking turns), relative to "
            "`sdpa` at the same length." + note + "\n\n" + relative_cost_table(COSTS) + sparse_prediction_table()
            + gpu_cost_table())


def cost_ratio(name: str, measurement: str, versus: str = "sdpa") -> float | None:
    """Row ``name``'s step time over row ``versus``'s in cost measurement ``measurement``, or None where not run."""
    result = read_result("cost", measurement)
    if not result or name not in result["steps"] or versus not in result["steps"]:
        return None
    return result["steps"][name]["step_seconds"] / result["steps"][versus]["step_seconds"]
