#!/usr/bin/env python
"""Fine-tuning on long documents (Linux documentation -> one of five subsystems): each benchmark row, a few seeds.

A GPU measurement (on a CPU the linear probe of ``represent.py`` stands in for it): ``run_text_classification.py``'s
own code (``--train_file data/train.jsonl --validation_file data/test.jsonl``, 200 training and 50 test
documents), ``--steps`` optimizer steps, each seed with its own sample and order; settings fixed in advance, not
tuned on the test split. Models: ``sdpa-512`` (MiniLM with its head, the first 512 tokens) or a row of
``rows.ROWS`` at a stage of ``pretrain.py`` (``<row>@<stage>``), read at 2,048 tokens (``--length 8192``: extended
once more as it loads, positions copied). Hybrids keep the window dropout of their masked-LM stage. Results:
``results/classification/<model>_<length>_seed<seed>.json``.

    python research/long_documents/run_classification.py --models sdpa-512 sdpa@mlm kerformer-w128@mlm \
        --seeds 1 2 3 --batch_size 8 --steps 250 --learning_rate 5e-5
"""

from __future__ import annotations

import argparse
import shutil
import time

from rows import LONG, ROWS, SHORT
from runs import DATA, MODELS, kept, set_threads, write_result

KIND = "classification"


def model_options(name: str, length: int) -> tuple[list[str], int]:
    """``run_text_classification.py``'s options that load model ``name``, and the length it reads."""
    from pretrain import HEAD_FOLDER, folder_of

    if name == "sdpa-512":
        return ["--model_name_or_path", str(HEAD_FOLDER)], SHORT
    row, _, stage = name.partition("@")
    if row not in ROWS or stage not in ("extend", "transfer", "mlm"):
        raise SystemExit(f"error: unknown model {name!r}: sdpa-512, or <row>@<stage> with a row of "
                         f"{', '.join(ROWS)} and a stage of extend, transfer, mlm")
    dropout = ["--window_dropout", str(ROWS[row].mlm_window_dropout)] if ROWS[row].mlm_window_dropout else []
    extension = ["--max_length", str(length)] if length > LONG else []
    return ["--model_name_or_path", str(folder_of(row, stage)), *dropout, *extension], length


def finetune(name: str, length: int, seed: int, args) -> dict:
    """One fine-tuning run; its test metrics and wall time (training and the one evaluation)."""
    from hf_effattn.finetuning.text_classification import main

    options, read = model_options(name, length)
    output = MODELS / "classification" / f"{name}_{length}_seed{seed}"
    started = time.perf_counter()
    outcome = main([
        *options, "--train_file", str(DATA / "train.jsonl"), "--validation_file", str(DATA / "test.jsonl"),
        "--max_length", str(read), "--per_device_train_batch_size", str(args.batch_size),
        "--per_device_eval_batch_size", str(args.batch_size), "--gradient_accumulation_steps",
        str(args.accumulation), "--learning_rate", str(args.learning_rate), "--num_warmup_steps",
        str(args.steps // 10), "--max_train_steps", str(args.steps), "--seed", str(seed), "--output_dir", str(output),
        "--overwrite_output_dir",
    ])
    seconds = round(time.perf_counter() - started, 1)
    shutil.rmtree(output)  # ~90 MB a run; the metrics are what the table needs
    return {"model": name, "length": read, "seed": seed, "steps": args.steps, "batch_size": args.batch_size,
            "accumulation": args.accumulation, "learning_rate": args.learning_rate,
            "test": outcome.final_metrics["validation"], "run_seconds": seconds, "history": outcome.state.history}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", required=True)
    parser.add_argument("--length", type=int, default=LONG, choices=(LONG, 8192))
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3])
    parser.add_argument("--steps", type=int, default=250, help="optimizer steps")
    parser.add_argument("--batch_size", type=int, default=8, help="documents per step and device")
    parser.add_argument("--accumulation", type=int, default=1)
    parser.add_argument("--learning_rate", type=float, default=5e-5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--again", action="store_true", help="fine-tune anew where a result exists")
    args = parser.parse_args()
    set_threads(args.threads)
    for name in args.models:
        model_options(name, args.length)  # every name checked before the first runs
    for seed in args.seeds:
        for name in args.models:
            result_name = f"{name}_{args.length}_seed{seed}"
            if not kept(KIND, result_name, args.again):
                write_result(KIND, result_name, finetune(name, args.length, seed, args))


if __name__ == "__main__":
    main()
