"""``hf-effattn convert``: the command line of :func:`~hf_effattn.conversion.convert.convert`.

    hf-effattn convert FacebookAI/roberta-base --attention_type kerformer --output_dir roberta-base-kerformer
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..options.argument_types import hub_id, learning_rate, positive_int, share
from ..options.parser_values import ATTENTIONS, MECHANISM_WEIGHT_LEARNING_RATE, MODEL_LENGTH, TASKS, TRAINABLE
from ..options.user_errors import refuse_options_without
from ..options.window_options import add_window_arguments, local_part_options


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("checkpoint", help="a local folder or Hub id of a RoBERTa, BERT, ViT or hf_effattn checkpoint")
    parser.add_argument("--attention_type", default=None, choices=ATTENTIONS,
                        help="the mechanism (default: the checkpoint's own, sdpa for a RoBERTa, BERT or ViT checkpoint)")
    parser.add_argument("--attention_config", type=json.loads, default=None, metavar="JSON",
                        help='the mechanism\'s settings, e.g. \'{"se_mode": "channel"}\' (default: paper defaults)')
    parser.add_argument("--output_dir", required=True, type=Path,
                        help="a new or empty folder (never the checkpoint's own); written whole, then moved into place")
    parser.add_argument("--overwrite_output_dir", action="store_true",
                        help="replace a --output_dir that is not empty, whole (its files are not kept)")
    parser.add_argument("--task", choices=TASKS, default=None,
                        help="the head (default: the checkpoint's own, else the bare encoder)")
    parser.add_argument("--num_labels", type=positive_int, default=None,
                        help="for a new classification head (sequence, token or image classification)")
    parser.add_argument("--convert_attention", action="store_true",
                        help="allow an hf_effattn checkpoint to change mechanism (shared weights are reused)")
    add_window_arguments(parser)
    parser.add_argument("--ignore_mismatched_sizes", action="store_true",
                        help="initialise anew the weights whose shapes the new settings change (they are logged)")
    parser.add_argument("--max_length", type=positive_int, default=None, metavar="N",
                        help="text: extend the model to inputs of up to N tokens (default: the checkpoint's)")
    parser.add_argument("--image_size", type=positive_int, default=None, metavar="S",
                        help="ViT: extend the model to images of SxS pixels (default: the checkpoint's)")
    parser.add_argument("--license", default=None, metavar="ID",
                        help="the model card's licence, a Hub licence id such as apache-2.0 (default: the one the "
                             "checkpoint's card states, else 'other' with a note)")
    parser.add_argument("--base_model", type=hub_id, default=None, metavar="ID",
                        help="the checkpoint's Hub id, which the model card names and links as its base_model "
                             "(default: the checkpoint's when it is a Hub id, else the base_model its card declares)")
    transfer = parser.add_argument_group("attention transfer (train the new attention to reproduce the checkpoint's)")
    transfer.add_argument("--transfer_data", default=None, metavar="SOURCE",
                          help="texts or images: a .txt/.csv/.json/.jsonl/.parquet file, a dataset folder or a Hub "
                               "dataset id (default: no transfer); the options below need it")
    transfer.add_argument("--transfer_steps", type=positive_int, help="optimizer steps (default 1000)")
    transfer.add_argument("--transfer_learning_rate", type=learning_rate, help="(default 3e-3)")
    transfer.add_argument("--transfer_train", choices=TRAINABLE,
                          help="what trains: the mechanism's new parameters, also its query/key/value projections "
                               "(default), or also the output projection")
    transfer.add_argument("--transfer_batch_size", type=positive_int, help="(default 16)")
    transfer.add_argument("--transfer_window_dropout", type=share, metavar="P",
                          help="with --local_window or --local_block: the share of steps on which the local part is "
                               "off, so that the mechanism learns to carry the attention alone (default 0)")
    transfer.add_argument("--transfer_mechanism_weight_learning_rate", type=learning_rate, metavar="LR",
                          help="with --local_window or --local_block: the learning rate of the gates, each head's "
                               "weight on the mechanism's part, in a group of their own (default "
                               f"{MECHANISM_WEIGHT_LEARNING_RATE:g})")
    transfer.add_argument("--transfer_max_length", type=length_or_model, metavar="N|model",
                          help="truncate texts to N tokens, at most the model's maximum length; 'model' for that "
                               "length (default: 128, or the model's maximum length if shorter)")
    transfer.add_argument("--transfer_column", help="the text or image column (default: the usual)")
    transfer.add_argument("--transfer_split", help="the split of a dataset folder or Hub dataset (default train)")
    transfer.add_argument("--seed", type=int, help="the order of the transfer batches (default 0)")


TRANSFER_OPTIONS = {  # option -> its name in convert(transfer=...); unset options take convert's defaults
    "transfer_steps": "steps", "transfer_learning_rate": "learning_rate", "transfer_train": "train",
    "transfer_batch_size": "batch_size", "transfer_max_length": "max_length", "transfer_column": "column",
    "transfer_window_dropout": "window_dropout",
    "transfer_mechanism_weight_learning_rate": "mechanism_weight_learning_rate",
    "transfer_split": "split", "seed": "seed",
}


def check_options(args) -> None:
    """Raise ``ValueError`` for options that would do nothing: the transfer's without ``--transfer_data``. (The
    Python API's checks, run by :func:`convert` before anything loads, cover the other options.)"""
    given = [f"--{option}" for option in TRANSFER_OPTIONS if getattr(args, option) is not None]
    if args.transfer_data is None and given:
        refuse_options_without(given, "an attention transfer", "--transfer_data SOURCE")


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
    return {"data": args.transfer_data, **{name: getattr(args, option) for option, name in TRANSFER_OPTIONS.items()
                                           if getattr(args, option) is not None}}


def run(args) -> int:
    from ..conversion.convert import convert

    check_options(args)
    overrides = {} if args.num_labels is None else {"num_labels": args.num_labels}
    model, report = convert(args.checkpoint, args.attention_type, args.output_dir, task=args.task,
                            attention_config=args.attention_config,
                            convert_attention=args.convert_attention,
                            ignore_mismatched_sizes=args.ignore_mismatched_sizes, transfer=transfer_arguments(args),
                            max_length=args.max_length, image_size=args.image_size,
                            overwrite_output_dir=args.overwrite_output_dir, license=args.license,
                            base_model=args.base_model, output_transfer_report=True, **overrides,
                            **local_part_options(args))
    if report is not None:
        print(report.format())
    local = model.config.local_part
    beside = "" if local is None else f", beside {local.kind_name}={local.size}"
    print(f"Saved {type(model).__name__} (attention_type={model.config.attention_type!r}, "
          f"attention_config={model.config.attention_config}{beside}) to {args.output_dir}")
    return 0
