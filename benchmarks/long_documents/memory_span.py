#!/usr/bin/env python
"""Beside aligned blocks, should a kernelized memory cover the keys of the other blocks only, or every key?

By default the memory's terms stand for the keys outside the query's block (``KernelAttention.
mechanism_outside_window = True``): each key is counted once, the block's own by its exact softmax. The alternative
adds the memory's terms for every key, the block's own counted twice. Both are measured on the budget of a Kerformer
block row of the benchmark pretrained without transfer (``--row``: ``kerformer-b512-direct``, or
``kerformer-b512-direct-gate-lr0.1-mlm160`` with the gates' own learning rate and twice the steps): MiniLM with its
head converted beside framed blocks of 512 at 2,048 tokens, then ``run_mlm.py``'s masked-LM pretraining (run in this
process, so that the class attribute holds), then the held-out masked-LM loss with and without the memory. The
``outside`` half is the benchmark's own row, read from ``results/masked_lm/<row>_mlm.json``; this script measures the
other. Its model is kept in ``models/<row>-all-keys-2048-{extend,mlm}``, the pretraining continuing its newest
checkpoint (every 20 steps), so a run stopped midway goes on where it stopped. Result:
``results/memory_span/<row>.json``.

    python benchmarks/long_documents/memory_span.py
    python benchmarks/long_documents/memory_span.py --row kerformer-b512-direct-gate-lr0.1-mlm160
"""

from __future__ import annotations

import argparse
import shutil

from common import LONG, ROWS, kept, read_result, set_threads, write_result
from pretrain import add_budget_arguments, folder_of

SPAN_ROWS = ("kerformer-b512-direct", "kerformer-b512-direct-gate-lr0.1-mlm160")


def measure(row_name: str, args) -> dict:
    from hf_effattn import convert
    from hf_effattn.finetuning.checkpoints import checkpoint_root
    from hf_effattn.finetuning.masked_lm import main as run_mlm
    from hf_effattn.modeling.kernel_attention import KernelAttention
    from pretrain import HEAD_FOLDER, evaluate_folder, mlm_command

    KernelAttention.mechanism_outside_window = False
    row = ROWS[row_name]
    extended, trained = folder_of(f"{row_name}-all-keys", "extend"), folder_of(f"{row_name}-all-keys", "mlm")
    if not extended.is_dir():  # convert writes the folder whole or not at all
        convert(str(HEAD_FOLDER), row.attention, extended, attention_config=row.settings, convert_attention=True,
                max_length=LONG)
    command = mlm_command(extended, trained, args, row=row)
    run_mlm(command[2:])  # after the interpreter and the script
    result = {"mechanism_outside_window": False, "row": row_name, **evaluate_folder(trained, LONG, row.block)}
    write_result("memory_span", row_name, result)
    shutil.rmtree(checkpoint_root(trained), ignore_errors=True)  # the result is saved: nothing to resume
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--row", choices=SPAN_ROWS, default=SPAN_ROWS[0], help="the Kerformer block row to remake")
    parser.add_argument("--again", action="store_true", help="measure anew where the result exists")
    add_budget_arguments(parser)
    args = parser.parse_args()
    outside = read_result("masked_lm", f"{args.row}_mlm")
    if outside is None:
        raise SystemExit(f"error: run the benchmark's own row first: python pretrain.py --rows {args.row}")
    if kept("memory_span", args.row, args.again):
        return
    set_threads(1)
    result = measure(args.row, args)
    print(f"memory over the other blocks: {outside['loss']:.4f} nats; over every key: {result['loss']:.4f}")


if __name__ == "__main__":
    main()
