"""Text data in each Hub dataset's own schema: GLUE's nine tasks, IMDB, Amazon polarity, local files."""

import pytest
from helpers.finetuning import (
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


def write_csv(path, header: str, rows: list[str]) -> str:
    path.write_text("\n".join([header, *rows]) + "\n")
    return str(path)


def labelled_rows(labels: list[str]) -> list[str]:
    return [f"w{i} w{i + 1},{label}" for i, label in enumerate(labels)]


def test_an_evaluation_label_missing_from_training_names_file_row_and_fix(tmp_path):
    train = write_csv(tmp_path / "train.csv", "review,sentiment", labelled_rows(["good", "bad"] * 4))
    dev = write_csv(tmp_path / "dev.csv", "review,sentiment", labelled_rows(["good", "bad", "neutral", "good"]))
    with pytest.raises(ValueError, match=r"dev.csv, row 3: label 'neutral' is not among the training labels "
                                         r"\(bad, good\): add examples of it to the training data"):
        prepare("--train_file", train, "--validation_file", dev, "--text_column_names", "review",
                "--label_column_name", "sentiment")


def test_a_label_only_in_the_held_out_rows_is_still_a_class(tmp_path):
    """The label set comes from the whole training file, before the validation rows are held out of it."""
    train = write_csv(tmp_path / "train.csv", "text,label", labelled_rows(["a", "b"] * 10 + ["rare"]))
    data = prepare("--train_file", train, "--validation_split_percentage", "50")
    assert data.labels.names == ["a", "b", "rare"]
    assert len(data.train) + len(data.evaluation["validation"]) == 21


@pytest.mark.parametrize("rows, message", [
    (["w1 w2,good", ",bad", "w3,good"], r"train.csv, row 2: no text in column 'text' \(an empty cell\)"),
    (["w1 w2,good", "w3,bad", "w4,"], r"train.csv, row 3: no label in column 'label' \(an empty cell\)"),
])
def test_a_row_without_text_or_label_names_file_row_and_fix(tmp_path, rows, message):
    train = write_csv(tmp_path / "train.csv", "text,label", rows)
    with pytest.raises(ValueError, match=message + ": fill it in or remove the row"):
        prepare("--train_file", train)


def test_an_empty_text_is_refused_but_an_empty_half_of_a_pair_is_not(tmp_path):
    import json

    def write(name: str, pairs: list[tuple[str, str]]) -> str:
        lines = [json.dumps({"title": title, "content": content, "label": i % 2})
                 for i, (title, content) in enumerate(pairs)]
        (tmp_path / name).write_text("\n".join(lines))
        return str(tmp_path / name)

    data = prepare("--train_file", write("half.jsonl", [("w1", "w2"), ("", "w3"), ("w4", "w5"), ("w6", "")]))
    assert len(data.train) + len(data.evaluation["validation"]) == 4
    with pytest.raises(ValueError, match=r"empty.jsonl, row 2: the text \(title, content\) is empty"):
        prepare("--train_file", write("empty.jsonl", [("w1", "w2"), ("", "  ")]))


def test_missing_and_zero_byte_files_are_named(tmp_path):
    (tmp_path / "empty.csv").write_bytes(b"")
    with pytest.raises(ValueError, match=r"--train_file .*empty.csv is empty \(0 bytes\)"):
        prepare("--train_file", str(tmp_path / "empty.csv"))
    train = write_csv(tmp_path / "train.csv", "text,label", labelled_rows(["a", "b"]))
    with pytest.raises(FileNotFoundError, match=r"--validation_file .*dev.csv not found"):
        prepare("--train_file", train, "--validation_file", str(tmp_path / "dev.csv"))


def test_a_non_text_column_is_refused(tmp_path):
    train = write_csv(tmp_path / "train.csv", "text,label", [f"{i},{i % 2}" for i in range(4)])
    with pytest.raises(ValueError, match="column 'text' holds int64, not text: name the text columns"):
        prepare("--train_file", train)


@pytest.mark.parametrize("option, value", [
    ("--num_train_epochs", "0"), ("--gradient_accumulation_steps", "0"), ("--max_length", "0"),
    ("--per_device_train_batch_size", "-1"), ("--max_train_steps", "0"), ("--num_warmup_steps", "-1"),
    ("--validation_split_percentage", "100"),
])
def test_counts_that_cannot_train_are_refused_by_the_parser(capsys, option, value):
    with pytest.raises(SystemExit) as exit:
        parse_args(["--model_name_or_path", "unused", "--output_dir", "unused", option, value])
    assert exit.value.code == 2
    assert f"argument {option}: expected " in capsys.readouterr().err


@pytest.mark.parametrize("option, value, message", [
    ("--gradient_accumulation_steps", "0", "--gradient_accumulation_steps 0: it must be at least 1"),
    ("--per_device_train_batch_size", "0", "--per_device_train_batch_size 0: it must be at least 1"),
    ("--num_train_epochs", "0", "--num_train_epochs 0 trains nothing"),
])
def test_the_trainer_script_refuses_counts_that_training_arguments_accepts(tmp_path, option, value, message):
    from hf_effattn.finetuning import text_classification_trainer

    with pytest.raises(ValueError, match=message):
        text_classification_trainer.parse_args(["--model_name_or_path", "m", "--output_dir", str(tmp_path), option,
                                                value])


def test_max_length_beyond_the_model_is_refused_before_training():
    from hf_effattn import EffAttnRobertaConfig
    from hf_effattn.finetuning.arguments import check_against_model

    config = EffAttnRobertaConfig(max_position_embeddings=34, pad_token_id=1)  # positions 2..33: 32 tokens
    check_against_model(parse_args(["--model_name_or_path", "m", "--output_dir", "o", "--max_length", "32"]), config)
    with pytest.raises(ValueError, match=r"--max_length 33 is longer than the 32 tokens m takes "
                                         r"\(max_position_embeddings 34\): use --max_length 32 or less"):
        check_against_model(parse_args(["--model_name_or_path", "m", "--output_dir", "o", "--max_length", "33"]),
                            config)


def test_the_script_reports_a_user_error_in_one_line_with_status_2(tmp_path, monkeypatch, capsys):
    """``finetune/run_text_classification.py`` as ``python`` runs it: --max_length above the checkpoint's 32."""
    import runpy

    from helpers.finetuning import REPO, tiny_text_checkpoint

    train = write_csv(tmp_path / "train.csv", "text,label", labelled_rows(["a", "b"] * 4))
    argv = ["run_text_classification.py", "--model_name_or_path", tiny_text_checkpoint(), "--train_file", train,
            "--max_length", "64", "--output_dir", str(tmp_path / "out")]
    monkeypatch.setattr("sys.argv", argv)
    with pytest.raises(SystemExit) as exit:
        runpy.run_path(str(REPO / "finetune" / "run_text_classification.py"), run_name="__main__")
    assert exit.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"run_text_classification.py: error: --max_length 64 is longer than the 32 tokens {tiny_text_checkpoint()} "
        "takes (max_position_embeddings 34): use --max_length 32 or less.")
    assert not (tmp_path / "out" / "checkpoints").exists()
