"""``finetune/run_trainer.py``: the same model and data through ``transformers.Trainer``."""

import json
import shutil

import pytest

from helpers.finetuning import one_torch_thread  # noqa: F401 (autouse: one torch thread)
from helpers.finetuning import MAX_LENGTH, glue_mirror, load_script, tiny_text_checkpoint
from huggingface_hub import ModelCard

from hf_effattn import EffAttnRobertaForSequenceClassification


def trainer_options(output_dir, *more: str) -> list[str]:
    return ["--model_name_or_path", tiny_text_checkpoint(), "--attention_type", "singularformer",
            "--task_name", "mnli", "--dataset_name", glue_mirror(), "--max_length", str(MAX_LENGTH),
            "--output_dir", str(output_dir), "--per_device_train_batch_size", "4", "--gradient_accumulation_steps",
            "2", "--max_steps", "3", "--learning_rate", "1e-3", "--report_to", "none", "--use_cpu", *more]


def test_trainer_with_gradient_accumulation_on_mnli(tmp_path):
    # The heads compute a mean loss (plus the auxiliary loss): Trainer must not rescale it by item counts.
    assert EffAttnRobertaForSequenceClassification.accepts_loss_kwargs is False
    results = load_script("run_trainer").main(trainer_options(tmp_path, "--save_strategy", "no"))
    assert set(results) == {"validation_matched", "validation_mismatched"}
    assert all(set(metrics) == {"accuracy"} for metrics in results.values())
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["attention_type"] == "singularformer" and "auto_map" in config
    card = ModelCard.load(tmp_path / "README.md")
    assert "singularformer" in card.data.tags and "| `gradient_accumulation_steps` | 2 |" in card.text
    assert (tmp_path / "tokenizer.json").is_file() and (tmp_path / "modeling_effattn_roberta.py").is_file()


def test_a_finished_trainer_run_is_replaced_only_with_overwrite_output_dir(tmp_path):
    """As with the Accelerate scripts: a folder holding a finished run is refused; --overwrite_output_dir removes
    the previous run's Trainer checkpoints before the new run writes its own."""
    script = load_script("run_trainer")
    script.main(trainer_options(tmp_path, "--save_strategy", "steps", "--save_steps", "2"))
    assert (tmp_path / "checkpoint-2").is_dir() and (tmp_path / "model.safetensors").is_file()
    before = (tmp_path / "model.safetensors").read_bytes()
    with pytest.raises(ValueError, match="holds a finished run .*pass --overwrite_output_dir"):
        script.main(trainer_options(tmp_path, "--save_strategy", "no"))
    assert (tmp_path / "model.safetensors").read_bytes() == before  # nothing touched
    script.main(trainer_options(tmp_path, "--save_strategy", "no", "--overwrite_output_dir"))
    assert not any(tmp_path.glob("checkpoint-*")) and (tmp_path / "model.safetensors").is_file()


def test_an_unfinished_trainer_run_continues_from_its_latest_checkpoint_as_the_refusal_says(tmp_path):
    """``--resume_from_checkpoint latest``, the fix that the refusal of a non-empty folder names, continues from the
    newest of Trainer's ``checkpoint-*`` folders, as it continues the other scripts' runs."""
    script = load_script("run_trainer")
    script.main(trainer_options(tmp_path, "--save_strategy", "steps", "--save_steps", "2"))
    for name in ("model.safetensors", "README.md", "checkpoint-3"):  # as a run killed after its checkpoint at step 2
        path = tmp_path / name
        shutil.rmtree(path) if path.is_dir() else path.unlink(missing_ok=True)
    with pytest.raises(ValueError, match="is not empty: pass --resume_from_checkpoint latest to continue the run"):
        script.main(trainer_options(tmp_path, "--save_strategy", "no"))
    results = script.main(trainer_options(tmp_path, "--save_strategy", "no", "--resume_from_checkpoint", "latest"))
    assert set(results) == {"validation_matched", "validation_mismatched"}
    assert (tmp_path / "model.safetensors").is_file() and (tmp_path / "README.md").is_file()
