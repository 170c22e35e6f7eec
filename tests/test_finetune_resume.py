"""Nothing lost: a run stopped at a checkpoint and resumed ends with exactly the weights of one that never stopped.

The runs use dropout, gradient accumulation and an uneven last accumulation window, so the global random
state, the data order and the optimizer/scheduler state must all be restored for the weights to match.
"""

import json
import shutil

import pytest
import torch
from finetune_fixtures import one_torch_thread  # noqa: F401 (autouse: one torch thread)
from finetune_fixtures import (
    MAX_LENGTH,
    cifar_mirror,
    glue_mirror,
    load_script,
    saved_weights,
    tiny_text_checkpoint,
    tiny_vit_checkpoint,
    training_options,
)

from hf_effattn.finetuning.checkpoints import STATE_FILE, latest_checkpoint


def text_run(output_dir, **overrides):
    # 32 rows, 4 per batch, 3 batches per step: 8 batches -> 3 optimizer steps per epoch, the last one short.
    return load_script("run_text_classification").main([
        "--model_name_or_path", tiny_text_checkpoint(dropout=0.1), "--attention_type", "singularformer",
        "--task_name", "sst2", "--dataset_name", glue_mirror(), "--max_length", str(MAX_LENGTH),
        *training_options(output_dir, **{"per_device_train_batch_size": 4, "gradient_accumulation_steps": 3,
                                         "num_train_epochs": 3, "checkpointing_steps": 2, **overrides}),
    ])


def image_run(output_dir, **overrides):
    return load_script("run_image_classification").main([
        "--model_name_or_path", tiny_vit_checkpoint(), "--attention_type", "kerformer",
        "--dataset_name", cifar_mirror(10),
        *training_options(output_dir, per_device_train_batch_size=6, num_train_epochs=2, checkpointing_steps="epoch",
                          **overrides),
    ])


def assert_same_weights(folder_a, folder_b):
    weights_a, weights_b = saved_weights(folder_a), saved_weights(folder_b)
    assert weights_a.keys() == weights_b.keys()
    for name in weights_a:
        assert torch.equal(weights_a[name], weights_b[name]), name


@pytest.fixture(scope="module")
def uninterrupted_text_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("uninterrupted")
    outcome = text_run(folder)
    assert outcome.state.completed_steps == 9
    return folder, outcome


@pytest.mark.parametrize("stop_after", [4, 6], ids=["mid-epoch", "end-of-epoch"])
def test_text_run_resumed_from_its_latest_checkpoint_matches(stop_after, uninterrupted_text_run, tmp_path):
    reference_folder, reference = uninterrupted_text_run
    paused = text_run(tmp_path, stop_after_steps=stop_after)
    assert not paused.finished and paused.state.completed_steps == stop_after
    assert not (tmp_path / "model.safetensors").exists()  # no final folder before the run ends
    assert latest_checkpoint(tmp_path).name == f"step_{stop_after}"

    resumed = text_run(tmp_path, resume_from_checkpoint="latest")
    assert resumed.finished
    assert_same_weights(reference_folder, tmp_path)
    assert [entry["eval"] for entry in resumed.state.history] == [entry["eval"] for entry in reference.state.history]
    assert resumed.state.best_step == reference.state.best_step


def test_resuming_from_an_explicit_earlier_checkpoint(uninterrupted_text_run, tmp_path):
    reference_folder, _ = uninterrupted_text_run
    text_run(tmp_path, stop_after_steps=5)
    shutil.rmtree(tmp_path / "checkpoints" / "step_5")  # as if the job died before writing it
    text_run(tmp_path, resume_from_checkpoint=str(tmp_path / "checkpoints" / "step_4"))
    assert_same_weights(reference_folder, tmp_path)


def test_image_run_with_augmentation_resumed_from_an_epoch_checkpoint_matches(tmp_path):
    image_run(tmp_path / "full")
    image_run(tmp_path / "paused", stop_after_steps=4)  # the end of the first epoch (4 steps of 6 images)
    assert latest_checkpoint(tmp_path / "paused").name == "epoch_0"
    # Loader workers augment in other processes: the images must not change.
    image_run(tmp_path / "paused", resume_from_checkpoint="latest", dataloader_num_workers=2)
    assert_same_weights(tmp_path / "full", tmp_path / "paused")


def test_latest_ignores_incomplete_checkpoints_and_starts_fresh_without_any(tmp_path):
    (tmp_path / "checkpoints" / "step_99").mkdir(parents=True)  # killed while saving: no training state
    assert latest_checkpoint(tmp_path) is None
    outcome = text_run(tmp_path, resume_from_checkpoint="latest", max_train_steps=2)
    assert outcome.finished and outcome.state.completed_steps == 2


def test_resuming_with_another_batch_layout_is_refused(tmp_path):
    text_run(tmp_path, stop_after_steps=2)
    state = json.loads((tmp_path / "checkpoints" / "step_2" / STATE_FILE).read_text())
    assert state["completed_steps"] == 2 and state["steps_per_epoch"] == 3
    with pytest.raises(ValueError, match="steps per epoch"):
        text_run(tmp_path, resume_from_checkpoint="latest", gradient_accumulation_steps=2)
    with pytest.raises(FileNotFoundError, match="not a complete checkpoint"):
        text_run(tmp_path, resume_from_checkpoint=str(tmp_path / "nowhere"))
