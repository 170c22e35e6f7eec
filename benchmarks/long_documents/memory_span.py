#!/usr/bin/env python
"""Beside aligned blocks, should a kernelized memory cover the keys of the other blocks only, or every key?

By default the memory's terms stand for the keys outside the query's block (``KernelAttention.
mechanism_outside_window = True``): each key is counted once, the block's own by its exact softmax. The alternative
adds the memory's terms for every key, the block's own counted twice. Both are measured on the same budget as the
benchmark's rows pretrained without transfer (``kerformer-b512-direct``): MiniLM with its head converted to Kerformer
beside framed blocks of 512 at 2,048 tokens, then ``run_mlm.py``'s masked-LM pretraining (run in this process, so
that the class attribute holds), then the held-out masked-LM loss with and without the memory and the gates. The
``outside`` half is the benchmark's own row, read from ``results/masked_lm/kerformer-b512-direct_mlm.json``; this
script measures the other. Result: ``results/memory_span/kerformer.json``.

    python benchmarks/long_documents/memory_span.py
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from common import LONG, ROWS, kept, read_result, set_threads, write_result
from pretrain import add_budget_arguments

ROW = "kerformer-b512-direct"


def measure(args) -> dict:
    from hf_effattn import convert
    from hf_effattn.finetuning.masked_lm import main as run_mlm
    from hf_effattn.modeling.kernel_attention import KernelAttention
    from pretrain import HEAD_FOLDER, evaluate_folder, mlm_command

    KernelAttention.mechanism_outside_window = False
    row = ROWS[ROW]
    with tempfile.TemporaryDirectory() as scratch:
        extended, trained = Path(scratch) / "extend", Path(scratch) / "mlm"
        convert(str(HEAD_FOLDER), row.attention, extended, attention_config=row.settings, convert_attention=True,
                max_length=LONG)
        command = mlm_command(extended, trained, args, row=row)
        run_mlm(command[2:])  # after the interpreter and the script
        return {"mechanism_outside_window": False, "row": ROW, **evaluate_folder(trained, LONG, row.block)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--again", action="store_true", help="measure anew where the result exists")
    add_budget_arguments(parser)
    args = parser.parse_args()
    if read_result("masked_lm", f"{ROW}_mlm") is None:
        raise SystemExit(f"error: run the benchmark's own row first: python pretrain.py --rows {ROW}")
    if kept("memory_span", "kerformer", args.again):
        return
    set_threads(1)
    result = measure(args)
    write_result("memory_span", "kerformer", result)
    outside = read_result("masked_lm", f"{ROW}_mlm")
    print(f"memory over the other blocks: {outside['loss']:.4f} nats; over every key: {result['loss']:.4f}")


if __name__ == "__main__":
    main()
