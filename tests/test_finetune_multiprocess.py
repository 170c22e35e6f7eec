"""Two CPU processes (``accelerate launch`` with gloo) train the same model as one process with the same global
batch: 2 x 4 examples per step against 1 x 8."""

import json
import os
import subprocess
import sys

import torch
from finetune_fixtures import one_torch_thread  # noqa: F401 (autouse: one torch thread)
from finetune_fixtures import (
    MAX_LENGTH,
    REPO,
    glue_mirror,
    load_script,
    saved_weights,
    tiny_text_checkpoint,
    training_options,
)


def test_two_cpu_processes_match_one_process_with_the_same_global_batch(tmp_path):
    # Dropout is off: the processes draw their dropout masks from other random streams than a single process.
    common = ["--model_name_or_path", tiny_text_checkpoint(dropout=0.0), "--attention_type", "kerformer",
              "--task_name", "mnli", "--dataset_name", glue_mirror(), "--max_length", str(MAX_LENGTH)]
    single = load_script("run_text_classification").main(
        common + training_options(tmp_path / "one", num_train_epochs=2, per_device_train_batch_size=8))

    env = dict(os.environ, ACCELERATE_USE_CPU="1", OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1",
               PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    command = [sys.executable, "-m", "accelerate.commands.launch",
               "--config_file", str(REPO / "configs" / "cpu_2proc.yaml"),
               str(REPO / "finetune" / "run_text_classification.py"),
               *common, *training_options(tmp_path / "two", num_train_epochs=2, per_device_train_batch_size=4)]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-4000:]
    assert "2 process(es)" in result.stderr  # the loop's plan, logged by the main process

    weights_one, weights_two = saved_weights(tmp_path / "one"), saved_weights(tmp_path / "two")
    for name in weights_one:
        torch.testing.assert_close(weights_two[name], weights_one[name], atol=1e-5, rtol=1e-4, msg=name)
    results_two = json.loads((tmp_path / "two" / "all_results.json").read_text())
    assert results_two["eval"] == single.final_metrics  # both eval splits, gathered over the processes
    assert results_two["history"][-1]["step"] == single.state.completed_steps == 8
