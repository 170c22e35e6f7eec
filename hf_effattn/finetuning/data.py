"""Loading raw datasets (Hub, local mirror of a Hub dataset, or local files) and the parts of a task
that do not depend on the modality: the evaluation splits, the label column and the label set.

Every source goes through ``datasets.load_dataset``: a Hub id (``nyu-mll/glue``), a local folder laid
out like the Hub repository (the tests use such mirrors), an image folder, or csv/json/parquet files.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

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


def add_dataset_arguments(parser: argparse.ArgumentParser) -> argparse._ArgumentGroup:
    """The data options both scripts share; returns the group so that each script adds its own."""
    group = parser.add_argument_group("data")
    group.add_argument("--dataset_name", default=None, help="A Hub dataset id or a local folder (e.g. a Hub mirror).")
    group.add_argument("--dataset_config_name", default=None, help="The dataset's configuration, if any.")
    group.add_argument("--train_file", default=None, help="A csv/json/jsonl/parquet file of training data.")
    group.add_argument("--validation_file", default=None, help="A file of evaluation data, same format.")
    group.add_argument("--label_column_name", default=None, help="The label column (default: label, fine_label).")
    group.add_argument("--validation_split_percentage", type=float, default=10.0,
                       help="Percent of train held out for evaluation where the dataset has no eval split.")
    group.add_argument("--max_train_samples", type=int, default=None, help="Keep only this many training rows.")
    group.add_argument("--max_eval_samples", type=int, default=None, help="Keep only this many rows per eval split.")
    return group


def file_loader(path: str) -> str:
    """The ``datasets`` builder for a local data file, chosen by its extension."""
    suffix = Path(path).suffix.lower()
    if suffix not in FILE_LOADERS:
        raise ValueError(f"Unsupported data file {path!r}: use one of {', '.join(sorted(FILE_LOADERS))}.")
    return FILE_LOADERS[suffix]


def load_raw_datasets(dataset_name: str | None, config_name: str | None, train_file: str | None,
                      validation_file: str | None):
    """A ``DatasetDict`` from a Hub id or local folder (with its config), or from local data files."""
    from datasets import load_dataset

    if train_file:
        data_files = {"train": train_file}
        if validation_file:
            if file_loader(validation_file) != file_loader(train_file):
                raise ValueError("--train_file and --validation_file must have the same format.")
            data_files["validation"] = validation_file
        return load_dataset(file_loader(train_file), data_files=data_files)
    if not dataset_name:
        raise ValueError("Give a dataset: --task_name, --dataset_name or --train_file.")
    return load_dataset(dataset_name, config_name)


def select_eval_splits(raw, preferred: tuple[str, ...] | None, validation_fraction: float, seed: int):
    """The evaluation split names, first the main one; splits ``validation`` off ``train`` where none exists."""
    if preferred:
        missing = [name for name in preferred if name not in raw]
        if missing:
            raise ValueError(f"The dataset has no split {missing[0]!r}; its splits: {', '.join(raw)}.")
        return raw, list(preferred)
    for name in EVAL_SPLITS:
        if name in raw:
            return raw, [name]
    split = raw["train"].train_test_split(test_size=validation_fraction, seed=seed)
    raw["train"], raw["validation"] = split["train"], split["test"]
    return raw, ["validation"]


def label_info(train_split, column: str | None) -> LabelInfo:
    """The label column (given, or the first of ``label``/``labels``/``fine_label``) and its label set."""
    from datasets import ClassLabel, Value

    column = column or next((name for name in LABEL_COLUMNS if name in train_split.column_names), None)
    if column is None or column not in train_split.column_names:
        raise ValueError(
            f"No label column found among {train_split.column_names}: name it with --label_column_name."
        )
    feature = train_split.features[column]
    if isinstance(feature, ClassLabel):
        return LabelInfo(column, list(feature.names))
    if isinstance(feature, Value) and feature.dtype.startswith("float"):
        return LabelInfo(column, None)
    values = sorted(set(train_split[column]))
    return LabelInfo(column, [str(value) for value in values], {value: i for i, value in enumerate(values)})


def limit_samples(dataset, count: int | None):
    """The first ``count`` rows of ``dataset`` (all of them when ``count`` is ``None``)."""
    return dataset if count is None else dataset.select(range(min(count, len(dataset))))
