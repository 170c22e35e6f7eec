"""Attention transfer before fine-tuning (``--attention_transfer_steps``): the run reports it in its folder and card,
and a resumed run takes the transferred weights from its checkpoint, transferring nothing again; ``run_trainer.py``
transfers before ``Trainer`` trains.
"""

from __future__ import annotations

import json

import torch
from helpers.finetuning import one_torch_thread  # noqa: F401 (autouse: one torch thread)
from helpers.finetuning import (
    MAX_LENGTH,
    glue_mirror,
    load_script,
    saved_weights,
    tiny_text_checkpoint,
    training_options,
)
from huggingface_hub import ModelCard

from hf_effattn.conversion.transfer import REPORT_FILE
from hf_effattn.finetuning import run as finetuning_run


def text_run(output_dir, **overrides):
    return load_script("run_text_classification").main([
        "--model_name_or_path", tiny_text_checkpoint(), "--attention_type", "kerformer",
        "--task_name", "sst2", "--dataset_name", glue_mirror(), "--max_length", str(MAX_LENGTH),
        "--attention_transfer_steps", "6",
        *training_options(output_dir, **{"num_train_epochs": 2, "checkpointing_steps": 2, **overrides}),
    ])


def test_finetuning_after_transfer_is_reported_and_stays_resumable(tmp_path, monkeypatch):
    assert text_run(tmp_path / "whole").finished
    report = json.loads((tmp_path / "whole" / REPORT_FILE).read_text())
    assert report["steps"] == 6 and report["data"] == f"the training inputs of {glue_mirror()}"
    card = ModelCard.load(tmp_path / "whole" / "README.md").text
    assert "## Attention transfer" in card and "6 steps" in card
    assert f"{report['hidden_cosine_after']:.3f}" in card

    assert not text_run(tmp_path / "resumed", stop_after_steps=3).finished
    report_file = tmp_path / "resumed" / REPORT_FILE

    def transfer_again(*args, **kwargs):
        raise AssertionError("a resumed run takes the transferred weights from its checkpoint")

    monkeypatch.setattr(finetuning_run, "transfer_attention", transfer_again)
    assert text_run(tmp_path / "resumed", resume_from_checkpoint="latest").finished
    whole, resumed = saved_weights(tmp_path / "whole"), saved_weights(tmp_path / "resumed")
    assert whole.keys() == resumed.keys()
    for name in whole:
        assert torch.equal(whole[name], resumed[name]), name
    resumed_report = json.loads(report_file.read_text())
    assert resumed_report.pop("peak_memory_bytes") > 0 and report.pop("peak_memory_bytes") > 0  # measured, each run
    assert resumed_report == report


def test_the_trainer_script_transfers_before_training(tmp_path):
    results = load_script("run_trainer").main([
        "--model_name_or_path", tiny_text_checkpoint(), "--attention_type", "dba", "--attention_transfer_steps", "3",
        "--task_name", "sst2", "--dataset_name", glue_mirror(), "--max_length", str(MAX_LENGTH),
        "--output_dir", str(tmp_path), "--per_device_train_batch_size", "4", "--max_steps", "2",
        "--report_to", "none", "--use_cpu", "--save_strategy", "no",
    ])
    assert set(results) == {"validation"}
    report = json.loads((tmp_path / REPORT_FILE).read_text())
    assert report["steps"] == 3 and report["examples_seen"] == 12 and report["attention_type"] == "dba"
    card = ModelCard.load(tmp_path / "README.md").text
    assert "## Attention transfer" in card and "| `attention_transfer_steps` | 3 |" in card
