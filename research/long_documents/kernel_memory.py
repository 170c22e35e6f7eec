#!/usr/bin/env python
"""Kerformer's memory beside aligned blocks, built over every key instead of the keys outside each block.

Under the shared normaliser (the setting ``shared_normaliser`` True, as the benchmark's Kerformer block rows have
it) a kernelized memory shares one normaliser with the block's softmax, and its terms stand for the keys outside the
query's block (the class attribute ``KernelAttention.mechanism_outside_window``): each key counted once, the
block's own by its exact softmax. This
remakes a Kerformer block row of the benchmark with the memory's terms for every key, the block's own counted twice
(the class attribute False, in this process: it is not saved with the model), on the row's own budget. (The other
way to build it, normalised on its own and mixed per head by a gate, is a setting saved with the model: the
benchmark's ``-gated`` rows.)

MiniLM with its head converted beside framed blocks of 512 at the row's length, ``run_mlm.py``'s masked-LM
pretraining on the row's data (run in this process, so that the class attribute holds), then the held-out masked-LM
loss at 2,048 with and without the memory, and per token (for the paired difference from the row). The benchmark's
own row is the other half, read from ``results/masked_lm/<row>_mlm.json``. The models are kept in
``models/<row>-all-keys-<length>-{extend,mlm}``, the pretraining continuing its newest checkpoint (every 20 steps),
so a run stopped midway goes on where it stopped. Result: ``results/memory_span/<row>.json``.

    python research/long_documents/kernel_memory.py --row kerformer-b512-direct-gate-lr0.1-mlm160
"""

from __future__ import annotations

import argparse
import shutil

from pretrain import add_budget_arguments
from rows import LONG, ROWS
from runs import kept, read_result, set_threads, write_result

KIND = "memory_span"
REMADE_ROWS = ("kerformer-b512-direct", "kerformer-b512-direct-gate-lr0.1-mlm160")


def measure(row_name: str, args) -> dict:
    from hf_effattn import convert
    from hf_effattn.finetuning.checkpoints import checkpoint_root
    from hf_effattn.finetuning.masked_lm import main as run_mlm
    from hf_effattn.modeling.kernel_attention import KernelAttention
    import long_range
    import pretrain

    row = ROWS[row_name]
    extended, trained = (pretrain.MODELS / f"{row_name}-all-keys-{row.length}-{stage}" for stage in ("extend", "mlm"))
    KernelAttention.mechanism_outside_window = False
    if not extended.is_dir():  # convert writes the folder whole or not at all
        convert(str(pretrain.HEAD_FOLDER), row.attention, extended, attention_config=row.settings,
                convert_attention=True, max_length=row.length)
    command = pretrain.mlm_command(extended, trained, args, row=row)
    run_mlm(command[2:])  # after the interpreter and the script
    losses, far = long_range.folder_losses(trained, LONG, block=row.block)  # per token: paired with the row
    result = {"row": row_name, **pretrain.evaluate_folder(trained, LONG, row.block), "losses": losses, "far": far}
    write_result(KIND, row_name, result)
    shutil.rmtree(checkpoint_root(trained), ignore_errors=True)  # the result is saved: nothing to resume
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--row", choices=REMADE_ROWS, default=REMADE_ROWS[0], help="the Kerformer block row to remake")
    parser.add_argument("--again", action="store_true", help="measure anew where the result exists")
    add_budget_arguments(parser)
    args = parser.parse_args()
    default = read_result("masked_lm", f"{args.row}_mlm")
    if default is None:
        raise SystemExit(f"error: run the benchmark's own row first: python pretrain.py --rows {args.row}")
    if kept(KIND, args.row, args.again):
        return
    set_threads(1)
    result = measure(args.row, args)
    print(f"the memory over the other blocks: {default['loss']:.4f} nats; over every key: {result['loss']:.4f}")


if __name__ == "__main__":
    main()
