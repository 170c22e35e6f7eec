"""Loading raw datasets (Hub, local mirror of a Hub dataset, or local files) and the parts of a task
that do not depend on the modality: the evaluation splits, the label column and the label set.

Every source goes through ``datasets.load_dataset``: a Hub id (``nyu-mll/glue``), a local folder laid
out like the Hub repository (the tests use such mirrors), an image folder, or csv/json/parquet files.

Before anything is tokenised or trained, every split used is checked (:func:`prepare_splits`): a missing or
empty file, a split without rows, a row without text, image or label, and an evaluation label the training
split lacks are errors that name the file (or split), the row (counted from 1, after any header) and the fix.
"""

from __future__ import annotations

import argparse
import functools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch

from ..options.argument_types import percentage, positive_int
from .metrics import MetricSpec

FILE_LOADERS = {".csv": "csv", ".json": "json", ".jsonl": "json", ".parquet": "parquet"}
LABEL_COLUMNS = ("label", "labels", "fine_label")
EVAL_SPLITS = ("validation", "validation_matched", "test")


@dataclass
class LabelInfo:
    """The label column, the class names (``None`` for a regression) and the map from raw values to ids."""

    column: str
    names: list[str] | None
    value_to_id: dict[Any, int] | None = None

    @property
    def is_regression(self) -> bool:
        return self.names is None

    @property
    def num_labels(self) -> int:
        return 1 if self.names is None else len(self.names)

    def encode(self, values: list) -> list:
        """Raw label values to what the model's loss takes: class ids, or floats for a regression."""
        if self.names is None:
            return [float(value) for value in values]
        if self.value_to_id is None:
            return list(values)
        return [self.value_to_id[value] for value in values]


@dataclass
class PreparedData:
    """What the training loop needs of a task, whatever the modality."""

    train: Any
    evaluation: dict[str, Any]
    collate_fn: Callable
    metrics: MetricSpec
    labels: LabelInfo
    dataset_id: str
    dataset_config: str | None = None


def add_dataset_arguments(parser: argparse.ArgumentParser, loaders: dict[str, str] = FILE_LOADERS,
                          labels: bool = True) -> argparse._ArgumentGroup:
    """The data options the scripts share (files of the formats ``loaders`` reads; a label column with ``labels``);
    returns the group so that each script adds its own."""
    group = parser.add_argument_group("data")
    group.add_argument("--dataset_name", default=None, help="A Hub dataset id or a local folder (e.g. a Hub mirror).")
    group.add_argument("--dataset_config_name", default=None, help="The dataset's configuration, if any.")
    group.add_argument("--train_file", default=None, help=f"A {file_formats(loaders)} file of training data.")
    group.add_argument("--validation_file", default=None, help="A file of evaluation data, same format.")
    if labels:
        group.add_argument("--label_column_name", default=None, help="The label column (default: label, fine_label).")
    group.add_argument("--validation_split_percentage", type=percentage, default=10.0,
                       help="Percent of train held out for evaluation where the dataset has no eval split.")
    group.add_argument("--max_train_samples", type=positive_int, default=None,
                       help="Keep only this many training examples (rows; run_mlm.py: blocks of tokens).")
    group.add_argument("--max_eval_samples", type=positive_int, default=None,
                       help="Keep only this many examples per eval split.")
    return group


def file_formats(loaders: dict[str, str]) -> str:
    """The file extensions ``loaders`` reads, as messages name them: ``csv/json/jsonl/parquet``."""
    return "/".join(sorted(suffix.lstrip(".") for suffix in loaders))


def file_loader(path: str, loaders: dict[str, str] = FILE_LOADERS) -> str:
    """The ``datasets`` builder for a local data file, chosen by its extension among ``loaders``."""
    suffix = Path(path).suffix.lower()
    if suffix not in loaders:
        raise ValueError(f"Unsupported data file {path!r}: use one of {', '.join(sorted(loaders))}.")
    return loaders[suffix]


def load_raw_datasets(dataset_name: str | None, config_name: str | None, train_file: str | None,
                      validation_file: str | None, loaders: dict[str, str] = FILE_LOADERS):
    """A ``DatasetDict`` from a Hub id or local folder (with its config), or from local data files (of the formats
    ``loaders`` reads)."""
    from datasets import load_dataset

    if train_file:
        check_data_file("train_file", train_file, loaders)
        data_files = {"train": train_file}
        if validation_file:
            if file_loader(validation_file, loaders) != file_loader(train_file, loaders):
                raise ValueError("--train_file and --validation_file must have the same format.")
            check_data_file("validation_file", validation_file, loaders)
            data_files["validation"] = validation_file
        return load_data_files(file_loader(train_file, loaders), data_files)
    if not dataset_name:
        raise ValueError("Give a dataset: --task_name, --dataset_name or --train_file.")
    return load_dataset(dataset_name, config_name)


def load_data_files(builder: str, data_files: dict[str, str]):
    """``load_dataset(builder, data_files=...)``; a file the builder cannot parse is a ``ValueError`` naming it."""
    from datasets import load_dataset
    from datasets.exceptions import DatasetGenerationError

    try:
        return load_dataset(builder, data_files=data_files)
    except DatasetGenerationError as error:
        cause = error.__cause__ or error
        raise ValueError(f"{' or '.join(dict.fromkeys(data_files.values()))} cannot be read as {builder} "
                         f"({type(cause).__name__}: {cause}): fix the file, or give one in another format.") from error


def check_data_file(option: str, path: str, loaders: dict[str, str] = FILE_LOADERS) -> None:
    """``--train_file`` / ``--validation_file``: an existing file with something in it."""
    if not Path(path).is_file():
        raise FileNotFoundError(f"--{option} {path} not found: give an existing {file_formats(loaders)} file.")
    if Path(path).stat().st_size == 0:
        raise ValueError(f"--{option} {path} is empty (0 bytes): give a file with rows of data.")


def evaluation_split_names(raw, preferred: tuple[str, ...] | None) -> list[str]:
    """The evaluation splits of ``raw``, first the main one; empty where training rows must be held out."""
    if preferred:
        missing = [name for name in preferred if name not in raw]
        if missing:
            raise ValueError(f"The dataset has no split {missing[0]!r}; its splits: {', '.join(raw)}.")
        return list(preferred)
    return next(([name] for name in EVAL_SPLITS if name in raw), [])


def select_eval_splits(raw, preferred: tuple[str, ...] | None, validation_fraction: float, seed: int, source: str):
    """The evaluation split names, first the main one; splits ``validation`` off ``train`` (``source``, as messages
    name it) where none exists, refusing a training split too small to leave rows on both sides."""
    names = evaluation_split_names(raw, preferred)
    if names:
        return raw, names
    rows = len(raw["train"])
    if rows - math.ceil(validation_fraction * rows) < 1:  # datasets holds out ceil(fraction * rows) rows
        raise ValueError(f"{source} has {rows} row{'s' * (rows != 1)}: holding out --validation_split_percentage "
                         f"{100 * validation_fraction:g} for evaluation leaves none to train on. Give a "
                         "--validation_file, more rows, or a smaller --validation_split_percentage.")
    split = raw["train"].train_test_split(test_size=validation_fraction, seed=seed)
    raw["train"], raw["validation"] = split["train"], split["test"]
    return raw, ["validation"]


def label_column(train_split, column: str | None) -> str:
    """The label column: given, or the first of ``label``/``labels``/``fine_label``."""
    column = column or next((name for name in LABEL_COLUMNS if name in train_split.column_names), None)
    if column is None or column not in train_split.column_names:
        raise ValueError(
            f"No label column found among {train_split.column_names}: name it with --label_column_name."
        )
    return column


def label_info(train_split, column: str | None) -> LabelInfo:
    """The label column (given, or the first of ``label``/``labels``/``fine_label``) and its label set."""
    from datasets import ClassLabel, Value

    column = label_column(train_split, column)
    feature = train_split.features[column]
    if isinstance(feature, ClassLabel):
        return LabelInfo(column, list(feature.names))
    if isinstance(feature, Value) and feature.dtype.startswith("float"):
        return LabelInfo(column, None)
    values = sorted(set(train_split[column]))
    return LabelInfo(column, [str(value) for value in values], {value: i for i, value in enumerate(values)})


def check_truncation(option: str, length: int, tokenizer, pair: bool = False) -> None:
    """``--<option> length`` leaves room for text beside the special tokens that ``tokenizer`` adds to a text (or a
    ``pair`` of texts): a tokenizer cannot truncate below them, and would keep the whole text instead."""
    special, each = tokenizer.num_special_tokens_to_add(pair=pair), "pair of texts" if pair else "text"
    if length <= special:
        raise ValueError(f"--{option} {length} leaves no room for text: the tokenizer adds {special} special tokens "
                         f"to each {each} and cannot truncate below them. Use --{option} {special + 1} or more.")


def example_generator(seed: int, epoch: int, index: int) -> torch.Generator:
    """The random generator of example ``index`` in ``epoch``: a pure function of the three, so that a resumed run,
    or one split over processes or loader workers, draws what a single uninterrupted run draws."""
    return torch.Generator().manual_seed(hash((seed, epoch, index)) & (2**63 - 1))


def limit_samples(dataset, count: int | None):
    """The first ``count`` rows of ``dataset`` (all of them when ``count`` is ``None``)."""
    return dataset if count is None else dataset.select(range(min(count, len(dataset))))


def split_source(args: argparse.Namespace, split: str, dataset_id: str) -> str:
    """How messages name a split: its file (``--train_file`` / ``--validation_file``), or the dataset's split."""
    files = {"train": args.train_file, "validation": args.validation_file} if args.train_file else {}
    return files.get(split) or f"split {split!r} of {dataset_id}"


def prepare_splits(raw, args: argparse.Namespace, input_columns: list[str], dataset_id: str,
                   preferred: tuple[str, ...] | None = None):
    """Check every split used, take the label set from the whole training split, then choose the evaluation
    splits (holding ``--validation_split_percentage`` of the training rows out where there is none).

    ``input_columns``: the text or image columns every row needs. Returns ``(raw, eval_splits, LabelInfo)``;
    raises ``ValueError`` naming the file or split, the row and the fix for a row without an input or a label,
    an empty split, or an evaluation label that the training split lacks."""
    used = ["train", *evaluation_split_names(raw, preferred)]
    column = label_column(raw["train"], args.label_column_name)
    for split in used:
        check_rows(raw[split], split_source(args, split, dataset_id), input_columns, column)
    labels = label_info(raw["train"], column)
    for split in used[1:]:
        check_known_labels(raw[split], labels, split_source(args, split, dataset_id))
    raw, eval_splits = select_eval_splits(raw, preferred, args.validation_split_percentage / 100, args.seed,
                                          split_source(args, "train", dataset_id))
    return raw, eval_splits, labels


def first_true(mask) -> int | None:
    """The index of the first true value of an arrow boolean array (None when there is none)."""
    import pyarrow.compute as pc

    index = pc.index(mask, True).as_py()
    return None if index < 0 else index


def check_rows(split, source: str, input_columns: list[str], label_column_name: str) -> None:
    """Every row of ``split`` has its inputs (a text, not all of them empty; an image) and a label."""
    import pyarrow.compute as pc
    from datasets import ClassLabel, Image, Value

    if len(split) == 0:
        raise ValueError(f"{source} has no rows: give data with at least one example.")
    columns = split.with_format("arrow")
    for name in (*input_columns, label_column_name):
        row = first_true(pc.is_null(columns[name]))
        if row is not None:
            image = isinstance(split.features[name], Image)
            what = "label" if name == label_column_name else "image" if image else "text"
            raise ValueError(f"{source}, row {row + 1}: no {what} in column {name!r} (an empty cell): fill it in "
                             "or remove the row.")
    if isinstance(split.features[label_column_name], ClassLabel):
        row = first_true(pc.equal(columns[label_column_name], -1))
        if row is not None:
            raise ValueError(f"{source}, row {row + 1}: label -1 (unlabelled, as in a Hub test split): train and "
                             "evaluate on labelled rows only.")
    texts = [name for name in input_columns if isinstance(split.features[name], Value)]
    for name in texts:
        if split.features[name].dtype not in ("string", "large_string"):
            raise ValueError(f"{source}: column {name!r} holds {split.features[name].dtype}, not text: name the "
                             "text columns with --text_column_names.")
    if texts:
        empty = [pc.equal(pc.utf8_length(pc.utf8_trim_whitespace(columns[name])), 0) for name in texts]
        row = first_true(functools.reduce(pc.and_, empty))
        if row is not None:
            raise ValueError(f"{source}, row {row + 1}: the text ({', '.join(texts)}) is empty: write it or "
                             "remove the row.")


def check_known_labels(split, labels: LabelInfo, source: str) -> None:
    """The labels of an evaluation split are among those the model learns from the training split."""
    feature = split.features[labels.column]
    if labels.value_to_id is None:
        if labels.names is not None and getattr(feature, "names", labels.names) != labels.names:
            raise ValueError(f"{source}: its label names {feature.names} differ from the training split's "
                             f"{labels.names}: use one label set for both.")
        return
    values = split[labels.column]
    unseen = next((row for row, value in enumerate(values) if value not in labels.value_to_id), None)
    if unseen is not None:
        raise ValueError(f"{source}, row {unseen + 1}: label {values[unseen]!r} is not among the training labels "
                         f"({', '.join(labels.names)}): add examples of it to the training data, or remove it "
                         "from the evaluation data.")
