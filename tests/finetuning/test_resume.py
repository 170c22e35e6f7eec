"""Nothing lost, nothing silently wrong: a run stopped at a checkpoint, or killed at any moment of a save, and
resumed ends with exactly the weights of one that never stopped; a resume that would take another path, and a
new run in a folder that holds one, are refused.

The runs use dropout, gradient accumulation and an uneven last accumulation window, so the global random
state, the data order and the optimizer/scheduler state must all be restored for the weights to match.
"""

import json
import re
import shutil
import signal
import subprocess
import sys

import pytest
import torch
from helpers.finetuning import one_torch_thread  # noqa: F401 (autouse: one torch thread)
from helpers.finetuning import (
    MAX_LENGTH,
    REPO,
    cifar_mirror,
    contents,
    glue_mirror,
    load_script,
    saved_weights,
    tiny_text_checkpoint,
    tiny_vit_checkpoint,
    training_options,
)

from hf_effattn.finetuning.checkpoints import (
    TrainingState,
    latest_checkpoint,
    read_state,
    resolve_checkpoint,
    write_state,
)


def text_argv(output_dir, **overrides) -> list[str]:
    # 32 rows, 4 per batch, 3 batches per step: 8 batches -> 3 optimizer steps per epoch, the last one short.
    return [
        "--model_name_or_path", tiny_text_checkpoint(dropout=0.1), "--attention_type", "singularformer",
        "--task_name", "sst2", "--dataset_name", glue_mirror(), "--max_length", str(MAX_LENGTH),
        *training_options(output_dir, **{"per_device_train_batch_size": 4, "gradient_accumulation_steps": 3,
                                         "num_train_epochs": 3, "checkpointing_steps": 2, **overrides}),
    ]


def text_run(output_dir, **overrides):
    return load_script("run_text_classification").main(text_argv(output_dir, **overrides))


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
    assert resumed.state.history == reference.state.history  # train_loss too: the whole epoch's, not since the resume
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


def test_resuming_with_other_settings_is_refused_naming_each(tmp_path):
    text_run(tmp_path, stop_after_steps=2)
    with pytest.raises(ValueError, match="is not empty: pass --resume_from_checkpoint latest to continue"):
        text_run(tmp_path)  # a new run would mix its checkpoints with the paused one's
    # Batches of 5 keep 3 optimizer steps per epoch (7 batches, 3 per step) but are other batches.
    checkpoint = tmp_path / "checkpoints" / "step_2"
    with pytest.raises(ValueError, match=re.escape(f"Cannot resume from {checkpoint}: it was saved")) as refusal:
        text_run(tmp_path, resume_from_checkpoint="latest", per_device_train_batch_size=5, learning_rate=2e-3, seed=1)
    differences = str(refusal.value).split("other settings: ")[1].split(". A resumed run")[0].split("; ")
    assert differences == ["--learning_rate: 0.001 in the checkpoint, 0.002 now",
                           "--per_device_train_batch_size: 4 in the checkpoint, 5 now",
                           "--seed: 0 in the checkpoint, 1 now"]
    with pytest.raises(ValueError, match="it is at step 2, beyond this run's step budget of 1;"):
        text_run(tmp_path, resume_from_checkpoint="latest", max_train_steps=1)
    with pytest.raises(ValueError, match="--resume_from_checkpoint: .*nowhere is not a complete checkpoint"):
        text_run(tmp_path, resume_from_checkpoint=str(tmp_path / "nowhere"))


def test_the_step_budget_may_be_given_in_epochs_or_in_steps(uninterrupted_text_run, tmp_path):
    reference_folder, _ = uninterrupted_text_run
    text_run(tmp_path, stop_after_steps=4)  # 3 epochs of 3 steps
    assert text_run(tmp_path, resume_from_checkpoint="latest", num_train_epochs=1, max_train_steps=9).finished
    assert_same_weights(reference_folder, tmp_path)


def test_a_finished_run_is_neither_replaced_nor_continued_without_overwrite_output_dir(uninterrupted_text_run,
                                                                                         tmp_path):
    reference_folder, _ = uninterrupted_text_run
    shutil.copytree(reference_folder, tmp_path, dirs_exist_ok=True)  # checkpoints step_2 ... step_8, best, final
    before = contents(tmp_path)
    with pytest.raises(ValueError, match="holds a finished run .*: pass --overwrite_output_dir to replace it"):
        text_run(tmp_path, learning_rate=2e-3)
    with pytest.raises(ValueError, match="holds a finished run"):
        text_run(tmp_path, learning_rate=2e-3, max_train_steps=6, resume_from_checkpoint="latest")
    with pytest.raises(ValueError, match=r"step_8: it is at step 8, beyond this run's step budget of 6; and it was "
                                         r"saved by a run with other settings: --learning_rate: 0.001 in the "
                                         r"checkpoint, 0.002 now; step budget: 9 in the checkpoint, 6 now\."):
        text_run(tmp_path, learning_rate=2e-3, max_train_steps=6, resume_from_checkpoint="latest",
                 overwrite_output_dir=True)
    assert contents(tmp_path) == before


def test_overwrite_output_dir_replaces_the_previous_run_whole(uninterrupted_text_run, tmp_path):
    reference_folder, _ = uninterrupted_text_run
    shutil.copytree(reference_folder, tmp_path / "replaced")
    (tmp_path / "replaced" / "hf_effattn_finetune").mkdir()  # a tracker's logs
    (tmp_path / "replaced" / "hf_effattn_finetune" / "events.out.tfevents.1").write_text("the replaced run's")
    (tmp_path / "replaced" / "notes.txt").write_text("no run writes this")
    text_run(tmp_path / "replaced", learning_rate=2e-3, max_train_steps=2, overwrite_output_dir=True)
    text_run(tmp_path / "fresh", learning_rate=2e-3, max_train_steps=2)
    assert_same_weights(tmp_path / "fresh", tmp_path / "replaced")
    assert sorted(path.name for path in (tmp_path / "replaced" / "checkpoints").iterdir()) == ["best", "step_2"]
    assert not (tmp_path / "replaced" / "hf_effattn_finetune").exists()
    assert not (tmp_path / "replaced" / "notes.txt").exists()  # replaced whole, as convert replaces a folder
    assert sorted(path.name for path in tmp_path.iterdir()) == ["fresh", "replaced"]  # no temporary folder left
    assert_same_weights(tmp_path / "fresh" / "checkpoints" / "best", tmp_path / "replaced" / "checkpoints" / "best")
    results = json.loads((tmp_path / "replaced" / "all_results.json").read_text())
    assert [entry["step"] for entry in results["history"]] == [2]


# -- crash safety: SIGKILL at each stage of a save ---------------------------------------------------------------

# stage -> the checkpoint `latest` finds afterwards (tests/helpers/kill_during_save.py describes the stages)
KILL_STAGES = {"optimizer_half": "step_4", "state_half": "step_4", "before_rename": "step_4",
               "between_renames": "step_2"}


@pytest.fixture(scope="module")
def killed_saves(tmp_path_factory):
    """Per stage, a copy of a run paused at step 4 (checkpoints step_2, step_4) that was then resumed from step_2 by
    a process killed at that stage of rewriting step_4; and how each process ended."""
    root = tmp_path_factory.mktemp("killed")
    text_run(root / "paused", stop_after_steps=4)
    jobs = []
    for stage in KILL_STAGES:
        shutil.copytree(root / "paused", root / stage)
        jobs.append({"stage": stage, "checkpoint": "step_4", "argv": text_argv(
            root / stage, resume_from_checkpoint=str(root / stage / "checkpoints" / "step_2"))})
    (root / "jobs.json").write_text(json.dumps(jobs))
    result = subprocess.run([sys.executable, str(REPO / "tests" / "helpers" / "kill_during_save.py"), str(root / "jobs.json"),
                             str(root / "ends.json")], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-4000:]
    return root, json.loads((root / "ends.json").read_text()), result.stderr


@pytest.mark.parametrize("stage", KILL_STAGES)
def test_a_run_killed_at_any_stage_of_a_save_resumes_exactly(stage, killed_saves, uninterrupted_text_run):
    root, ends, log = killed_saves
    assert ends[stage] == -signal.SIGKILL, log[-4000:]
    assert latest_checkpoint(root / stage).name == KILL_STAGES[stage]
    assert text_run(root / stage, resume_from_checkpoint="latest").finished
    assert_same_weights(uninterrupted_text_run[0], root / stage)
    assert sorted(path.name for path in (root / stage / "checkpoints").iterdir()) == [
        "best", "step_2", "step_4", "step_6", "step_8"]  # nothing half-written is left


def test_latest_skips_unreadable_checkpoints_and_names_them(tmp_path, caplog):
    root = tmp_path / "checkpoints"
    for name, steps in (("step_2", 2), ("step_4", 4), (".step_6.partial", 6)):
        (root / name).mkdir(parents=True)
        write_state(root / name, TrainingState(completed_steps=steps))
    (root / "step_4" / "training_state.json").write_text('{"completed_steps": 4, "fing')  # cut short
    (root / "step_5").mkdir()  # no training state
    assert latest_checkpoint(tmp_path) == root / "step_2"
    assert f"{root / 'step_4' / 'training_state.json'} is unreadable (JSONDecodeError" in caplog.text
    assert f"{root / 'step_5'} is not a complete checkpoint (no training_state.json)" in caplog.text
    assert read_state(root / "step_2").completed_steps == 2
    with pytest.raises(ValueError, match="--resume_from_checkpoint: .*step_4/training_state.json is unreadable"):
        resolve_checkpoint(str(root / "step_4"), tmp_path)
