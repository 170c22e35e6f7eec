"""Text classification data: GLUE (``nyu-mll/glue``), IMDB (``stanfordnlp/imdb``), Amazon polarity
(``fancyzhx/amazon_polarity``) and local csv/json/parquet files, tokenised for the model.

The text columns follow each dataset's own schema: GLUE's per-task sentence keys, IMDB's ``text``,
Amazon polarity's ``title`` and ``content`` (encoded as a pair), and for local files the first known
schema that matches, or ``--text_column_names``.
"""

from __future__ import annotations

import argparse

from ..options.argument_types import positive_int
from .data import (
    PreparedData,
    add_dataset_arguments,
    check_truncation,
    limit_samples,
    load_raw_datasets,
    prepare_splits,
)
from .metrics import metric_spec

GLUE_DATASET = "nyu-mll/glue"
GLUE_TEXT_COLUMNS = {
    "cola": ("sentence", None),
    "sst2": ("sentence", None),
    "mrpc": ("sentence1", "sentence2"),
    "qqp": ("question1", "question2"),
    "stsb": ("sentence1", "sentence2"),
    "mnli": ("premise", "hypothesis"),
    "qnli": ("question", "sentence"),
    "rte": ("sentence1", "sentence2"),
    "wnli": ("sentence1", "sentence2"),
}
GLUE_EVAL_SPLITS = {"mnli": ("validation_matched", "validation_mismatched")}
# Schemas of other datasets, tried in order: Amazon polarity, IMDB, and the GLUE-like pairs.
KNOWN_TEXT_COLUMNS = (
    ("title", "content"),
    ("text", None),
    ("sentence1", "sentence2"),
    ("question1", "question2"),
    ("premise", "hypothesis"),
    ("question", "sentence"),
    ("sentence", None),
)


def add_text_data_arguments(parser: argparse.ArgumentParser) -> None:
    """The data options of the text scripts: the shared ones, GLUE's task, text columns and lengths."""
    group = add_dataset_arguments(parser)
    group.add_argument("--task_name", choices=sorted(GLUE_TEXT_COLUMNS), default=None,
                       help="A GLUE task, loaded from nyu-mll/glue (or from --dataset_name, a local mirror).")
    group.add_argument("--text_column_names", default=None,
                       help="One or two comma-separated text columns (default: from the dataset's schema).")
    group.add_argument("--max_length", type=positive_int, default=128,
                       help="Truncate inputs to this many tokens (at most the model's maximum, e.g. 512).")
    group.add_argument("--pad_to_max_length", action="store_true",
                       help="Pad every input to --max_length (default: pad each batch to its longest).")


def text_columns(column_names: list[str], task_name: str | None, override: str | None) -> tuple[str, str | None]:
    """The one or two text columns: given, GLUE's for the task, or the first known schema present."""
    if override:
        names = [name.strip() for name in override.split(",")]
        if len(names) > 2 or any(name not in column_names for name in names):
            raise ValueError(f"--text_column_names {override!r} must name one or two of {column_names}.")
        return names[0], names[1] if len(names) == 2 else None
    if task_name:
        return GLUE_TEXT_COLUMNS[task_name]
    for first, second in KNOWN_TEXT_COLUMNS:
        if first in column_names and (second is None or second in column_names):
            return first, second
    raise ValueError(f"No known text columns among {column_names}: name them with --text_column_names.")


def reads_glue(args: argparse.Namespace) -> bool:
    """Whether the data is GLUE's (``nyu-mll/glue`` or a local copy), not the task's columns in local files."""
    return bool(args.task_name) and not args.train_file


def load_text_datasets(args: argparse.Namespace):
    """The raw ``DatasetDict`` the options name: GLUE task, Hub/local dataset, or local files."""
    if reads_glue(args):
        return load_raw_datasets(args.dataset_name or GLUE_DATASET, args.task_name, None, None)
    return load_raw_datasets(args.dataset_name, args.dataset_config_name, args.train_file, args.validation_file)


def prepare_text_data(args: argparse.Namespace, tokenizer, model_config=None) -> PreparedData:
    """Load, select splits, encode labels and tokenise; the result feeds the training loop."""
    from transformers import DataCollatorWithPadding

    raw = load_text_datasets(args)
    dataset_id = args.train_file or args.dataset_name or GLUE_DATASET
    first, second = text_columns(raw["train"].column_names, args.task_name, args.text_column_names)
    check_truncation("max_length", args.max_length, tokenizer, pair=second is not None)
    preferred = GLUE_EVAL_SPLITS.get(args.task_name) if reads_glue(args) else None
    raw, eval_splits, labels = prepare_splits(raw, args, [name for name in (first, second) if name], dataset_id,
                                              preferred)
    padding = "max_length" if args.pad_to_max_length else False

    def encode(batch):
        texts = (batch[first],) if second is None else (batch[first], batch[second])
        encoded = tokenizer(*texts, padding=padding, max_length=args.max_length, truncation=True)
        encoded["labels"] = labels.encode(batch[labels.column])
        return encoded

    def tokenize(split: str, count: int | None):
        rows = limit_samples(raw[split], count)
        return rows.map(encode, batched=True, remove_columns=rows.column_names, desc=f"Tokenizing {split}")

    return PreparedData(
        train=tokenize("train", args.max_train_samples),
        evaluation={split: tokenize(split, args.max_eval_samples) for split in eval_splits},
        collate_fn=DataCollatorWithPadding(tokenizer),
        metrics=metric_spec(args.task_name, labels.is_regression),
        labels=labels,
        dataset_id=dataset_id,
        dataset_config=args.task_name or args.dataset_config_name,
    )
