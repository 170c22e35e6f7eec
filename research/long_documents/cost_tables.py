"""The long-document benchmark's cost tables (``results/cost.md``, written by ``tables.py``), from what
``cost.py`` saved: each row's training step time and peak memory as multiples of `sdpa`'s, on a CPU and, where
measured, on a GPU, and the masked-LM step with dense and sparse logits."""

from __future__ import annotations

from rows import LONG, ROWS
from runs import read_result
from table_files import markdown_table, table_rows

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


def sparse_prediction_rows() -> list[list[str]]:
    """Each row's masked-LM step, seconds with dense and sparse logits, and their ratio (none where not measured)."""
    sparse = read_result("cost", f"masked_lm_{LONG}") or {"steps": {}}
    rows = []
    for name in sorted({subject.rsplit(" ", 1)[0] for subject in sparse["steps"]}):
        dense, only_masked = (sparse["steps"][f"{name} {kind}"]["step_seconds"] for kind in ("dense", "sparse"))
        rows.append([f"`{name}`", f"{dense:.2f}", f"{only_masked:.2f}", f"{only_masked / dense:.2f}x"])
    return rows


def sparse_prediction_table() -> str:
    """The masked-LM step with dense and sparse logits, where ``cost.py --masked_lm`` measured it."""
    rows = table_rows("cost_sparse_logits", sparse_prediction_rows)
    if not rows:
        return ""
    return ("\n\nMasked-LM step at 2,048 with the logits at every token (dense) or only at the masked ones (sparse, "
            "what `run_mlm.py` does):\n\n"
            + markdown_table(["row", "dense: s / step", "sparse: s / step", "sparse / dense"], rows))


def relative_cost_rows(measurements: dict[str, str]) -> list[list[str]]:
    """Each row's step time and peak memory in each cost result of ``measurements`` (name: title), as multiples of
    `sdpa`'s; the rows of the first result measured (every row where none is)."""
    measured = next(filter(None, map(lambda name: read_result("cost", name), measurements)), None)
    names = list(measured["steps"]) if measured else list(ROWS)
    return [[f"`{name}`", *(cost_cell(name, measurement, key) for measurement in measurements
                            for key in ("step_seconds", "peak_mib"))] for name in names]


def relative_cost_table(table: str, measurements: dict[str, str]) -> str:
    """Compact table ``table``: :func:`relative_cost_rows` of ``measurements``."""
    header = ["row", *(f"{kind} {title}" for title in measurements.values() for kind in ("step time", "peak memory"))]
    return markdown_table(header, table_rows(table, lambda: relative_cost_rows(measurements)))


def gpu_setting() -> list[list[str]]:
    """How the GPU's costs were measured, in words (none where they were not)."""
    measured = [read_result("cost", name) for name in GPU_COSTS]
    if not any(measured):
        return []
    first = next(filter(None, measured))
    softmax = ", ".join(f"{result['steps']['sdpa']['step_seconds'] * 1000:.0f} ms and "
                        f"{result['steps']['sdpa']['peak_mib'] / 1024:.1f} GiB {title}"
                        for result, title in zip(measured, GPU_COSTS.values()) if result)
    tokens = first["batch_size"] * first["length"]
    return [[(f"On a GPU, {first['device']}: the same step under bfloat16 autocast, the document repeated into a "
              f"batch of {tokens:,} tokens, MiniLM's attention dropout, median of {first['repeats']}; MiniLM's "
              "configuration with random weights (the trained checkpoint was not copied to the GPU machine, and the "
              f"cost does not depend on the weights); `sdpa` itself: {softmax}.")]]


def gpu_cost_table() -> str:
    """The same step on a GPU (``cost.py --dtype bfloat16 --batch_size B`` where CUDA is), where it was measured."""
    setting = table_rows("cost_gpu_setting", gpu_setting)
    if not setting:
        return ""
    return f"\n\n{setting[0][0]}\n\n" + relative_cost_table("cost_gpu", GPU_COSTS)


def softmax_cost() -> list[list[str]]:
    """`sdpa`'s own step on the CPU at 2,048, in words (none where not measured)."""
    measured = read_result("cost", str(LONG))
    if not measured or "sdpa" not in measured["steps"]:
        return []
    return [[(f" `sdpa` itself: {measured['steps']['sdpa']['step_seconds']:.1f} s and "
              f"{measured['steps']['sdpa']['peak_mib'] / 1024:.1f} GiB at 2,048 ({measured['threads']} thread).")]]


def cost_table() -> str:
    note = "".join(row[0] for row in table_rows("cost_softmax", softmax_cost))
    note += (" MiniLM trains with dropout on its attention probabilities (0.1), which takes PyTorch's CPU `sdpa` off "
             "its fused kernel onto one that writes the N x N probabilities out; without it `sdpa` runs the fused "
             "kernel, in linear memory, the only way it fits at 8,192 on this machine.")
    return ("One training step (forward, backward, AdamW; batch 1; one thread; rows taking turns), relative to "
            "`sdpa` at the same length." + note + "\n\n" + relative_cost_table("cost_cpu", COSTS)
            + sparse_prediction_table() + gpu_cost_table())


def cost_ratio(name: str, measurement: str, versus: str = "sdpa") -> float | None:
    """Row ``name``'s step time over row ``versus``'s in cost measurement ``measurement``, or None where not run."""
    result = read_result("cost", measurement)
    if not result or name not in result["steps"] or versus not in result["steps"]:
        return None
    return result["steps"][name]["step_seconds"] / result["steps"][versus]["step_seconds"]
