"""Two CPU processes (``accelerate launch`` with gloo) train the same model as one process with the same global
batch: 2 x 4 examples per step against 1 x 8, with DDP (``configs/cpu_2proc.yaml``, with tensorboard tracking, which
must not end the process group before the final save) and with FSDP's full sharding
(``configs/fsdp_full_shard.yaml``), the latter also stopped at a checkpoint (``accelerator.save_state`` of the
sharded model, optimizer and scheduler) and resumed; under FSDP a masked-LM model keeps its tied weights and
reloads its saved state exactly. Hybrid sharding and DeepSpeed need GPUs: not run here."""

import json

import torch
from helpers.finetuning import one_torch_thread  # noqa: F401 (autouse: one torch thread)
from helpers.finetuning import (
    MAX_LENGTH,
    REPO,
    glue_mirror,
    launch_two_cpu_processes,
    load_script,
    saved_weights,
    tiny_text_checkpoint,
    training_options,
)


TEXT_SCRIPT = REPO / "finetune" / "run_text_classification.py"


def run_once(output_dir, attention: str, task: str):
    """The one-process run (8 examples per step, 2 epochs) and the options shared with the two-process run."""
    # Dropout is off: the processes draw their dropout masks from other random streams than a single process.
    common = ["--model_name_or_path", tiny_text_checkpoint(dropout=0.0), "--attention_type", attention,
              "--task_name", task, "--dataset_name", glue_mirror(), "--max_length", str(MAX_LENGTH)]
    single = load_script("run_text_classification").main(
        common + training_options(output_dir, num_train_epochs=2, per_device_train_batch_size=8))
    return single, common


def assert_same_weights(folder_two, folder_one):
    weights_one, weights_two = saved_weights(folder_one), saved_weights(folder_two)
    assert weights_two.keys() == weights_one.keys()
    for name in weights_one:
        torch.testing.assert_close(weights_two[name], weights_one[name], atol=1e-5, rtol=1e-4, msg=name)


def test_two_cpu_processes_with_tracking_match_one_process_with_the_same_global_batch(tmp_path):
    single, common = run_once(tmp_path / "one", "kerformer", "mnli")
    result = launch_two_cpu_processes("cpu_2proc", TEXT_SCRIPT, [
        *common, *training_options(tmp_path / "two", num_train_epochs=2, per_device_train_batch_size=4,
                                   with_tracking=True, report_to="tensorboard")])
    assert result.returncode == 0, result.stderr[-4000:]
    assert "2 process(es)" in result.stderr  # the loop's plan, logged by the main process
    assert (tmp_path / "two" / "README.md").is_file()  # the model card, written after the final save
    assert len(list((tmp_path / "two" / "hf_effattn_finetune").glob("events.out.tfevents.*"))) == 1

    assert_same_weights(tmp_path / "two", tmp_path / "one")
    results_two = json.loads((tmp_path / "two" / "all_results.json").read_text())
    assert results_two["eval"] == single.final_metrics  # both eval splits, gathered over the processes
    assert results_two["history"][-1]["step"] == single.state.completed_steps == 8


def test_fsdp_on_two_cpu_processes_matches_one_process_and_resumes(tmp_path):
    _, common = run_once(tmp_path / "one", "psf", "sst2")
    sharded = common + training_options(tmp_path / "two", num_train_epochs=2, per_device_train_batch_size=4,
                                        checkpointing_steps=2)
    for extra in (["--stop_after_steps", "4"], ["--resume_from_checkpoint", "latest"]):
        result = launch_two_cpu_processes("fsdp_full_shard", TEXT_SCRIPT, sharded + extra)
        assert result.returncode == 0, result.stderr[-4000:]
    assert "2 process(es)" in result.stderr and "Resum" in result.stderr
    assert_same_weights(tmp_path / "two", tmp_path / "one")


def test_fsdp_keeps_tied_weights_and_restores_saved_state(tmp_path):
    """The masked-LM head's decoder is tied to the word embeddings (``_tied_weights_keys``)."""
    result = launch_two_cpu_processes("fsdp_full_shard", REPO / "tests" / "helpers" / "fsdp_tied_weights_script.py",
                                      [str(tmp_path / "state"), str(tmp_path / "result.json")])
    assert result.returncode == 0, result.stderr[-4000:]
    assert json.loads((tmp_path / "result.json").read_text()) == {"tied": True, "restored": True, "processes": 2}
