#!/usr/bin/env python
"""What bfloat16 costs a trained PSF block hybrid, and what PSF's kernels add by keeping its values in bfloat16.

Under bfloat16 autocast PSF's exact path computes its product of factors in float32; its CUDA kernels
(``modeling/chord_kernels.py``) keep bfloat16 values in bfloat16, each factor's sums in float32 and its result
stored in bfloat16, to gather half the bytes. The kernels run only on a GPU (Triton's interpreter, on a CPU,
truncates where a GPU rounds to the nearest), so :func:`kernels_arithmetic` emulates their arithmetic in PyTorch
operations, rounding to the nearest as a GPU does. On a PSF block row pretrained by ``pretrain.py``, read as its
results were (``long_range.token_losses``: the same held-out masked tokens, framed at its blocks), this measures
the masked-LM loss of every token three ways:

* ``float32``: as the row's results were measured;
* ``bfloat16``: under bfloat16 autocast, on the exact path;
* ``bfloat16_storage``: under bfloat16 autocast, with the kernels' arithmetic;

and the paired per-token differences, with their standard errors; each for the model as trained and for its memory
alone (every layer PSF's product only, the blocks off: a model it was not trained as, where PSF's arithmetic is the
whole attention). Results: ``results/psf_bfloat16/<row>.json`` and the table ``results/psf_bfloat16.md``.

    python research/long_documents/psf_bfloat16.py --rows local-b512-mlm160-at512-rerun-then-psf-gated-mlm160
"""

from __future__ import annotations

import argparse
from contextlib import contextmanager, nullcontext

from long_range import reader, token_losses
from rows import ROWS
from runs import default_device, measure_each, read_result, set_threads
from table_files import markdown_table, mean_and_error, publish, table_rows

KIND = "psf_bfloat16"
PRECISIONS = ("float32", "bfloat16", "bfloat16_storage")
PAIRS = (("bfloat16", "float32"), ("bfloat16_storage", "bfloat16"), ("bfloat16_storage", "float32"))
PSF_BLOCK_ROWS = [name for name, row in ROWS.items() if row.attention == "psf" and row.block]
PARTS = {"both": None, "memory alone": "mechanism"}  # each reading's name -> hybrid_parts.only_part's part


def as_the_kernels(factor):
    """``factor(values [B, N, C], weights [B, N, K])``, one of PSF's factors on the exact path, with the kernels'
    arithmetic: the values' sums in float32, the result stored in bfloat16 (rounded to the nearest)."""
    import torch

    return lambda values, weights: factor(values.float(), weights).to(torch.bfloat16)


@contextmanager
def kernels_arithmetic():
    """Within the block every PSF layer computes its product with the kernels' arithmetic on bfloat16 values (the
    module docstring), on any device; PSF's own ``mix`` again after it."""
    import torch

    from hf_effattn.modeling.attention_psf import PSFAttention
    from hf_effattn.modeling.chord_mixes import cyclic_chord_mix

    exact = PSFAttention.mix

    def mix(self, values, weights, padding_mask):
        factor = as_the_kernels(self.cyclic_factor(cyclic_chord_mix, values, padding_mask))
        return self.in_rank_order(values.to(torch.bfloat16), weights, padding_mask, factor)

    PSFAttention.mix = mix
    try:
        yield
    finally:
        PSFAttention.mix = exact


def read(model, tokenizer, length: int, block: int | None, precision: str) -> list[float]:
    """:func:`long_range.token_losses` of ``model`` in ``precision`` (one of ``PRECISIONS``)."""
    import torch

    autocast = torch.autocast(model.device.type, dtype=torch.bfloat16, enabled=precision != "float32")
    with autocast, kernels_arithmetic() if precision == "bfloat16_storage" else nullcontext():
        return token_losses(model, tokenizer, length, block)


def measure(row: str) -> dict:
    from transformers import AutoTokenizer

    from hf_effattn import EffAttnRobertaForMaskedLM
    from hf_effattn.models.hybrid_parts import only_part

    folder, length, _, block = reader(f"{row}@mlm")
    model = EffAttnRobertaForMaskedLM.from_pretrained(folder).to(default_device()).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    result = {"row": row, "folder": folder, "length": length, "framed_block": block}
    for reading, part in PARTS.items():
        with only_part(model, part):
            result[reading] = summary({precision: read(model, tokenizer, length, block, precision)
                                       for precision in PRECISIONS})
    return result


def summary(losses: dict[str, list[float]]) -> dict:
    """The mean loss of each precision and the paired differences of ``PAIRS``, each a (mean, standard error), from
    every masked token's loss in each precision (the same tokens, in the same order)."""
    return {"masked_tokens": len(losses["float32"]),
            "loss": {precision: mean_and_error(values)[0] for precision, values in losses.items()},
            "differences": {f"{a} - {b}": mean_and_error([x - y for x, y in zip(losses[a], losses[b], strict=True)])
                            for a, b in PAIRS}}


def rows() -> list[list[str]]:
    """Every measured row's loss in float32 and the paired differences, in nats a masked token."""
    lines = []
    for row in PSF_BLOCK_ROWS:
        result = read_result(KIND, row) or {}
        for reading in PARTS:
            if reading in result:
                measured = result[reading]
                lines.append([f"`{row}`", reading, f"{measured['loss']['float32']:.4f}",
                              *("%+.4f ± %.4f" % tuple(measured["differences"][f"{a} - {b}"]) for a, b in PAIRS)])
    return lines


def table() -> str:
    header = ["row", "reading", "float32", *(f"{a} - {b}" for a, b in PAIRS)]
    return ("Held-out masked-LM loss of PSF block rows (nats a masked token, the same tokens each way) in float32, and "
            "the paired differences: bfloat16 autocast on the exact path, and with the arithmetic of PSF's kernels "
            "(each factor stored in bfloat16); as trained, and with the memory alone (the blocks off):\n\n"
            + markdown_table(header, table_rows(KIND, rows)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", nargs="+", required=True, choices=PSF_BLOCK_ROWS)
    parser.add_argument("--again", action="store_true", help="measure a row even where its result exists")
    args = parser.parse_args()
    set_threads(1)
    measure_each(KIND, args.rows, measure, args.again)
    publish(KIND, table())


if __name__ == "__main__":
    main()
