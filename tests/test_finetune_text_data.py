"""Text data in each Hub dataset's own schema: GLUE's nine tasks, IMDB, Amazon polarity, local files."""

import pytest
from finetune_fixtures import (
    GLUE_SCHEMAS,
    amazon_polarity_mirror,
    glue_mirror,
    imdb_mirror,
    sentence,
    tiny_tokenizer,
)

from hf_effattn.finetuning.text_classification import parse_args
from hf_effattn.finetuning.text_data import prepare_text_data, text_columns


def prepare(*options):
    args = parse_args(["--model_name_or_path", "unused", "--output_dir", "unused", "--max_length", "32", *options])
    return prepare_text_data(args, tiny_tokenizer())


@pytest.mark.parametrize("task", sorted(GLUE_SCHEMAS))
def test_each_glue_task_reads_its_own_columns_labels_and_splits(task):
    data = prepare("--task_name", task, "--dataset_name", glue_mirror())
    columns, names = GLUE_SCHEMAS[task]
    expected_splits = ["validation_matched", "validation_mismatched"] if task == "mnli" else ["validation"]
    assert list(data.evaluation) == expected_splits
    assert data.labels.names == names and data.labels.is_regression == (task == "stsb")
    assert data.dataset_config == task
    example = data.train[0]
    assert set(example) == {"input_ids", "attention_mask", "labels"}
    separators = example["input_ids"].count(tiny_tokenizer().sep_token_id)
    assert separators == (1 if len(columns) == 1 else 3)  # <s> A </s> or <s> A </s></s> B </s>
    assert isinstance(example["labels"], float if task == "stsb" else int)
    assert len(data.train) == 32 and all(len(split) == 16 for split in data.evaluation.values())


def test_glue_task_names_its_metrics():
    assert prepare("--task_name", "cola", "--dataset_name", glue_mirror()).metrics.names == ("matthews_correlation",)
    assert prepare("--task_name", "qqp", "--dataset_name", glue_mirror()).metrics.names == ("accuracy", "f1")


def test_imdb_evaluates_on_test_and_ignores_the_unlabelled_split():
    data = prepare("--dataset_name", imdb_mirror())
    assert list(data.evaluation) == ["test"] and data.labels.names == ["neg", "pos"]
    assert data.train[0]["input_ids"].count(tiny_tokenizer().sep_token_id) == 1


def test_amazon_polarity_encodes_title_and_content_as_a_pair():
    data = prepare("--dataset_name", amazon_polarity_mirror())
    assert data.labels.names == ["negative", "positive"] and list(data.evaluation) == ["test"]
    assert data.train[0]["input_ids"].count(tiny_tokenizer().sep_token_id) == 3


def test_local_csv_with_string_labels_and_a_held_out_validation_split(tmp_path):
    import random

    rng = random.Random(0)
    rows = ["review,sentiment"] + [f"{sentence(rng)},{rng.choice(['good', 'bad'])}" for _ in range(40)]
    (tmp_path / "train.csv").write_text("\n".join(rows))
    data = prepare("--train_file", str(tmp_path / "train.csv"), "--text_column_names", "review",
                   "--label_column_name", "sentiment", "--validation_split_percentage", "25")
    assert data.labels.names == ["bad", "good"]
    assert len(data.train) == 30 and len(data.evaluation["validation"]) == 10
    assert {row["labels"] for row in data.train} == {0, 1}


def test_local_json_regression_and_sample_limits(tmp_path):
    import json

    lines = [json.dumps({"sentence1": "w1 w2", "sentence2": "w3", "label": float(i % 5)}) for i in range(20)]
    for name in ("train", "dev"):
        (tmp_path / f"{name}.jsonl").write_text("\n".join(lines))
    data = prepare("--train_file", str(tmp_path / "train.jsonl"), "--validation_file", str(tmp_path / "dev.jsonl"),
                   "--max_train_samples", "8", "--max_eval_samples", "4")
    assert data.labels.is_regression and data.metrics.names == ("pearson", "spearmanr")
    assert len(data.train) == 8 and len(data.evaluation["validation"]) == 4


def test_unknown_columns_and_formats_are_explained(tmp_path):
    with pytest.raises(ValueError, match="--text_column_names"):
        text_columns(["body", "label"], None, None)
    with pytest.raises(ValueError, match="must name one or two"):
        text_columns(["body", "label"], None, "body,missing")
    (tmp_path / "train.txt").write_text("x")
    with pytest.raises(ValueError, match="Unsupported data file"):
        prepare("--train_file", str(tmp_path / "train.txt"))


def test_glue_task_from_local_files_uses_the_task_columns_and_metrics(tmp_path):
    rows = ["premise,hypothesis,label"] + [f"w1 w2,w3 w{i},{i % 3}" for i in range(12)]
    for name in ("train", "dev"):
        (tmp_path / f"{name}.csv").write_text("\n".join(rows))
    data = prepare("--task_name", "mnli", "--train_file", str(tmp_path / "train.csv"),
                   "--validation_file", str(tmp_path / "dev.csv"))
    assert list(data.evaluation) == ["validation"] and data.labels.num_labels == 3
    assert data.train[0]["input_ids"].count(tiny_tokenizer().sep_token_id) == 3
