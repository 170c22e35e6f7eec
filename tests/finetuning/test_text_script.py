"""``finetune/run_text_classification.py`` end to end, in-process, on tiny local copies of the Hub datasets."""

import json

import pytest
from helpers.finetuning import one_torch_thread  # noqa: F401 (autouse: one torch thread)
from helpers.finetuning import (
    MAX_LENGTH,
    amazon_polarity_mirror,
    glue_mirror,
    imdb_mirror,
    load_script,
    tiny_text_checkpoint,
    training_options,
)
from huggingface_hub import ModelCard

REMOTE_CODE_FILES = ("modeling_effattn_roberta.py", "configuration_effattn.py")  # generated for the model

RUNS = {
    # name: (data options, attention, expected eval splits, expected metrics)
    "sst2": (["--task_name", "sst2", "--dataset_name", glue_mirror], "kerformer", ["validation"], {"accuracy"}),
    "stsb": (["--task_name", "stsb", "--dataset_name", glue_mirror], "singularformer", ["validation"],
             {"pearson", "spearmanr", "combined_score"}),
    "mnli": (["--task_name", "mnli", "--dataset_name", glue_mirror], "dba",
             ["validation_matched", "validation_mismatched"], {"accuracy"}),
    "imdb": (["--dataset_name", imdb_mirror], "psf", ["test"], {"accuracy"}),
    "amazon": (["--dataset_name", amazon_polarity_mirror], "sdpa", ["test"], {"accuracy"}),
}


@pytest.mark.parametrize("name", list(RUNS))
def test_a_run_trains_evaluates_and_leaves_a_hub_ready_folder(name, tmp_path):
    data_options, attention, splits, metric_names = RUNS[name]
    data_options = [option() if callable(option) else option for option in data_options]
    outcome = load_script("run_text_classification").main([
        "--model_name_or_path", tiny_text_checkpoint(), "--attention_type", attention, *data_options,
        "--max_length", str(MAX_LENGTH), *training_options(tmp_path, num_train_epochs=2),
    ])
    assert outcome.finished and outcome.state.completed_steps == 8
    assert list(outcome.final_metrics) == splits
    assert all(set(metrics) == metric_names for metrics in outcome.final_metrics.values())
    assert [entry["epoch"] for entry in outcome.state.history] == [0, 1]

    config = json.loads((tmp_path / "config.json").read_text())
    assert config["attention_type"] == attention and config["model_type"] == "effattn_roberta"
    assert config["auto_map"]["AutoModelForSequenceClassification"].endswith("EffAttnRobertaForSequenceClassification")
    for file in ("model.safetensors", "tokenizer.json", "tokenizer_config.json", "all_results.json",
                 *REMOTE_CODE_FILES):
        assert (tmp_path / file).is_file(), file
    assert (tmp_path / "checkpoints" / "best" / "model.safetensors").is_file()
    card = ModelCard.load(tmp_path / "README.md")
    assert attention in card.data.tags and card.data.pipeline_tag == "text-classification"
    assert "trust_remote_code=True" in card.text
    results = json.loads((tmp_path / "all_results.json").read_text())
    assert results["eval"] == outcome.final_metrics and results["best_step"] in (4, 8)


def test_regression_labels_configure_a_one_output_head(tmp_path):
    load_script("run_text_classification").main([
        "--model_name_or_path", tiny_text_checkpoint(), "--task_name", "stsb", "--dataset_name", glue_mirror(),
        "--max_length", str(MAX_LENGTH), *training_options(tmp_path, max_train_steps=1),
    ])
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["problem_type"] == "regression" and len(config["id2label"]) == 1


def test_label_names_reach_the_config(tmp_path):
    load_script("run_text_classification").main([
        "--model_name_or_path", tiny_text_checkpoint(), "--task_name", "mnli", "--dataset_name", glue_mirror(),
        "--max_length", str(MAX_LENGTH), "--pad_to_max_length", *training_options(tmp_path, max_train_steps=1),
    ])
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["id2label"] == {"0": "entailment", "1": "neutral", "2": "contradiction"}


def test_bad_options_are_refused_with_a_message(tmp_path, capsys):
    script = load_script("run_text_classification")
    base = ["--model_name_or_path", tiny_text_checkpoint(), "--output_dir", str(tmp_path)]
    with pytest.raises(SystemExit):
        script.main([*base, "--task_name", "sst2", "--attention_config", "{not json"])
    assert "--attention_config is not valid JSON" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        script.main([*base, "--task_name", "sst2", "--checkpointing_steps", "often"])
    assert "--checkpointing_steps must be a positive integer or 'epoch'" in capsys.readouterr().err
    with pytest.raises(ValueError, match="Give a dataset"):
        script.main([*base, "--max_length", str(MAX_LENGTH)])  # the default 128 is refused first (32 positions)
    missing = ["--model_name_or_path", str(tmp_path / "no-such-model"), "--output_dir", str(tmp_path / "out")]
    for main in (script.main, load_script("run_trainer").main):  # a local folder, not the Hub's id complaint
        with pytest.raises(FileNotFoundError, match=r"Checkpoint folder .*no-such-model not found"):
            main([*missing, "--task_name", "sst2"])


def test_log_lines_never_break_into_the_progress_bar(tmp_path):
    """In a real process (pytest's own log handlers would hide the console handler): every log line printed
    while the bar is shown starts a line of its own."""
    import os
    import subprocess
    import sys

    from helpers.finetuning import REPO

    argv = ["--model_name_or_path", tiny_text_checkpoint(), "--attention_type", "kerformer", "--task_name", "sst2",
            "--dataset_name", glue_mirror(), "--max_length", str(MAX_LENGTH),
            *training_options(tmp_path / "out", num_train_epochs=2, per_device_train_batch_size=4)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    result = subprocess.run([sys.executable, str(REPO / "finetune" / "run_text_classification.py"), *argv],
                            env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    logged = [line for line in result.stderr.split("\n") if "epoch 0 (step" in line or "epoch 1 (step" in line]
    assert len(logged) == 2
    for line in logged:
        assert "Training:" not in line.split("\r")[-1], line
