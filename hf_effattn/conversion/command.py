"""``hf-effattn convert``: the command line of :func:`~hf_effattn.conversion.convert.convert`.

    hf-effattn convert FacebookAI/roberta-base --attention_type kerformer --output_dir roberta-base-kerformer
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..command_line import positive_int
from ..modeling.attentions import list_attentions
from ..presets import TASKS
from .convert import convert
from .transfer import MODEL_LENGTH, REPORT_FILE, TRAINABLE, TransferReport


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("checkpoint", help="a local folder or Hub id of a RoBERTa, BERT, ViT or hf_effattn checkpoint")
    parser.add_argument("--attention_type", required=True, choices=list_attentions())
    parser.add_argument("--attention_config", type=json.loads, default=None, metavar="JSON",
                        help='the mechanism\'s settings, e.g. \'{"se_mode": "channel"}\' (default: paper defaults)')
    parser.add_argument("--output_dir", required=True, type=Path)
    parser.add_argument("--task", choices=sorted({t for tasks in TASKS.values() for t in tasks}), default=None,
                        help="the head (default: the checkpoint's own, else the bare encoder)")
    parser.add_argument("--num_labels", type=int, default=None, help="for a new classification head")
    parser.add_argument("--convert_attention", action="store_true",
                        help="allow an hf_effattn checkpoint to change mechanism (shared weights are reused)")
    parser.add_argument("--ignore_mismatched_sizes", action="store_true",
                        help="initialise anew the weights whose shapes the new settings change (they are logged)")
    parser.add_argument("--max_length", type=positive_int, default=None, metavar="N",
                        help="text: extend the model to inputs of up to N tokens (default: the checkpoint's)")
    parser.add_argument("--image_size", type=positive_int, default=None, metavar="S",
                        help="ViT: extend the model to images of SxS pixels (default: the checkpoint's)")
    transfer = parser.add_argument_group("attention transfer (train the new attention to reproduce the checkpoint's)")
    transfer.add_argument("--transfer_data", default=None, metavar="SOURCE",
                          help="texts or images: a .txt/.csv/.json/.jsonl/.parquet file, a dataset folder or a Hub "
                               "dataset id (default: no transfer)")
    transfer.add_argument("--transfer_steps", type=positive_int, default=1000, help="optimizer steps (default 1000)")
    transfer.add_argument("--transfer_learning_rate", type=float, default=3e-3)
    transfer.add_argument("--transfer_train", choices=TRAINABLE, default="attention",
                          help="what trains: the mechanism's new parameters, also its query/key/value projections "
                               "(default), or also the output projection")
    transfer.add_argument("--transfer_batch_size", type=positive_int, default=16)
    transfer.add_argument("--transfer_max_length", type=length_or_model, default=None, metavar="N|model",
                          help="truncate texts to N tokens, at most the model's maximum length; 'model' for that "
                               "length (default: 128, or the model's maximum length if shorter)")
    transfer.add_argument("--transfer_column", default=None, help="the text or image column (default: the usual)")
    transfer.add_argument("--transfer_split", default="train", help="the split of a dataset folder or Hub dataset")
    transfer.add_argument("--seed", type=int, default=0, help="the order of the transfer batches")


def length_or_model(text: str) -> int | str:
    """An ``argparse`` type: a positive number of tokens, or ``model`` (the model's maximum length)."""
    if text == MODEL_LENGTH:
        return text
    try:
        return positive_int(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"expected a positive integer or {MODEL_LENGTH!r}, got {text!r}") from None


def transfer_arguments(args) -> dict | None:
    """The ``transfer`` argument of :func:`convert` from the command line (``None`` without ``--transfer_data``)."""
    if args.transfer_data is None:
        return None
    return {"data": args.transfer_data, "column": args.transfer_column, "split": args.transfer_split,
            "batch_size": args.transfer_batch_size, "max_length": args.transfer_max_length, "seed": args.seed,
            "steps": args.transfer_steps, "learning_rate": args.transfer_learning_rate, "train": args.transfer_train}


def run(args) -> int:
    overrides = {} if args.num_labels is None else {"num_labels": args.num_labels}
    model = convert(args.checkpoint, args.attention_type, args.output_dir, task=args.task,
                    attention_config=args.attention_config, convert_attention=args.convert_attention,
                    ignore_mismatched_sizes=args.ignore_mismatched_sizes, transfer=transfer_arguments(args),
                    max_length=args.max_length, image_size=args.image_size, **overrides)
    report = Path(args.output_dir) / REPORT_FILE
    if args.transfer_data is not None:
        print(TransferReport.from_dict(json.loads(report.read_text())).format())
    print(f"Saved {type(model).__name__} (attention_type={model.config.attention_type!r}, "
          f"attention_config={model.config.attention_config}) to {args.output_dir}")
    return 0
