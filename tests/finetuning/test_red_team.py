"""Red team: every way found to make the training scripts destroy what they read, end with status 0 and a NaN
loss, or silently ignore an option, tried as a new user would on tiny checkpoints saved by Transformers.

Each case is refused with a line that names the cause and the fix (or, where the case is a bug that is fixed, now
does the right thing), and every input of the command is byte-for-byte unchanged afterwards. The cases of the
model layer (a size argument of the other family, extending positions twice) are with the models' tests
(``tests/models/test_errors.py``, ``tests/models/test_position_extension.py``).
"""

from __future__ import annotations

import json
import os
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
    glue_mirror,
    load_script,
    saved_weights,
    tiny_text_checkpoint,
    tiny_tokenizer,
    tiny_vit_checkpoint,
    training_options,
)
from helpers.red_team import finished_mlm_run, no_data_loads, text_reference  # noqa: F401 (fixtures)
from helpers.red_team import copied, mlm_argv, refused, run_mlm, run_text, text_argv, texts_file

from hf_effattn.commands import main as cli
from hf_effattn.conversion import convert
from hf_effattn.finetuning.checkpoints import read_state


# -- the output folder against what the run reads ------------------------------------------------------------------

def test_the_models_own_folder_is_refused_with_or_without_overwrite_output_dir(tmp_path):
    r1 = copied(tiny_text_checkpoint(), tmp_path / "r1")
    train = texts_file(tmp_path / "data")
    mlm, text = load_script("run_mlm").main, load_script("run_text_classification").main
    for overwrite in (False, True):
        flags = ["--overwrite_output_dir"] * overwrite
        message = refused(mlm, mlm_argv(r1, train, r1, *flags), [r1, train], "is the model's own folder")
        assert message == (f"--output_dir {r1} is the model's own folder (--model_name_or_path): writing there would "
                           "replace what this command reads. Choose another --output_dir.")
        refused(text, text_argv(r1, *flags, model=r1), [r1], "is the model's own folder")
    refused(mlm, mlm_argv(r1, train, r1 / "run"), [r1, train], r"is part of the model \(--model_name_or_path .*r1\): "
            "writing there would change it. Choose another --output_dir, outside")
    assert not (r1 / "run").exists()


def test_an_output_folder_that_holds_the_data_or_the_tokenizer_is_refused(tmp_path):
    out = tmp_path / "out"
    train = texts_file(out / "data")
    tokenizer = tiny_tokenizer()
    tokenizer.save_pretrained(out / "tokenizer")
    (out / "notes.txt").write_text("mine")
    mlm = load_script("run_mlm").main
    argv = mlm_argv(tiny_text_checkpoint(), train, out, "--overwrite_output_dir")
    refused(mlm, argv, [out], r"contains the training data \(--train_file .*train.txt\): replacing the folder would "
            "delete it. Choose another --output_dir, outside")
    elsewhere = texts_file(tmp_path / "data")
    refused(mlm, [*mlm_argv(tiny_text_checkpoint(), elsewhere, out, "--overwrite_output_dir"), "--tokenizer_name",
                  str(out / "tokenizer")], [out, elsewhere], "contains the tokenizer")
    refused(mlm, mlm_argv(tiny_text_checkpoint(), elsewhere, tmp_path / "data", "--overwrite_output_dir"),
            [elsewhere], "contains the training data")


def test_continuing_from_the_best_checkpoint_into_its_own_run_is_refused(finished_mlm_run, tmp_path):
    run, train = finished_mlm_run
    run = copied(run, tmp_path / "run")
    (run / "checkpoints" / "my_notes.txt").write_text("the user's own")
    best = run / "checkpoints" / "best"
    refused(load_script("run_mlm").main, mlm_argv(best, train, run, "--overwrite_output_dir"), [run, train],
            r"contains the model \(--model_name_or_path .*checkpoints/best\)")


def test_every_script_checks_its_output_folder_against_its_inputs(tmp_path, capsys):
    vit = copied(tiny_vit_checkpoint(), tmp_path / "vit")
    image = load_script("run_image_classification").main
    refused(image, ["--model_name_or_path", str(vit), "--dataset_name", "never-read",
                    *training_options(vit, overwrite_output_dir=True)], [vit], "is the model's own folder")
    refused(image, ["--model_name_or_path", tiny_vit_checkpoint(), "--image_processor_name", str(vit),
                    "--dataset_name", "never-read", *training_options(tmp_path, overwrite_output_dir=True)],
            [vit], "contains the image processor")
    r1 = copied(tiny_text_checkpoint(), tmp_path / "r1")
    trainer_argv = ["--model_name_or_path", str(r1), "--task_name", "sst2", "--dataset_name", glue_mirror(),
                    "--max_length", str(MAX_LENGTH), "--output_dir", str(r1), "--overwrite_output_dir", "--use_cpu"]
    refused(load_script("run_trainer").main, trainer_argv, [r1], "is the model's own folder")
    data = texts_file(tmp_path / "converted" / "texts")
    refused(lambda out: convert(str(r1), "kerformer", out, overwrite_output_dir=True,
                                transfer={"data": str(data), "steps": 1}),
            tmp_path / "converted", [r1, data], "contains the transfer data")
    with pytest.raises(SystemExit) as exit:  # before training, which may take hours
        cli.main(["train-task", "adding", "--steps", "1", "--metrics_file", str(tmp_path)])
    assert exit.value.code == 2 and "is a folder: give a file name" in capsys.readouterr().err
    finished = tmp_path / "metrics.json"
    finished.write_text('{"accuracy": 0.9}')
    with pytest.raises(SystemExit) as exit:  # a finished run's result is never replaced unasked
        cli.main(["train-task", "adding", "--steps", "1", "--metrics_file", str(finished)])
    message = capsys.readouterr().err
    assert exit.value.code == 2 and "exists (a finished run's result)" in message
    assert "--overwrite_metrics_file" in message and finished.read_text() == '{"accuracy": 0.9}'


# -- --overwrite_output_dir replaces a folder whole, and only once the new run has something to put there ------

def test_a_replacement_that_fails_leaves_the_previous_folder_as_it_was(finished_mlm_run, tmp_path):
    run, train = finished_mlm_run
    run = copied(run, tmp_path / "run")
    argv = mlm_argv(tiny_text_checkpoint(), train, run, "--overwrite_output_dir", "--mlm_probability", "1e-9")
    message = refused(load_script("run_mlm").main, argv, [run, train], "No token of the training batch at step 1 was "
                      "masked")
    assert "--mlm_probability 1e-09" in message
    assert sorted(path.name for path in tmp_path.iterdir()) == ["run"]  # no temporary folder left


def test_a_kill_during_the_final_save_is_finished_by_resume_latest(text_reference, tmp_path):
    reference, _ = text_reference
    killed = tmp_path / "killed"
    jobs = [{"stage": "final_weights_half", "checkpoint": killed.name, "argv": text_argv(killed)}]
    (tmp_path / "jobs.json").write_text(json.dumps(jobs))
    result = subprocess.run([sys.executable, str(REPO / "tests" / "helpers" / "kill_during_save.py"),
                             str(tmp_path / "jobs.json"), str(tmp_path / "ends.json")],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-4000:]
    assert json.loads((tmp_path / "ends.json").read_text()) == {"final_weights_half": -signal.SIGKILL}
    assert (killed / "model.safetensors").is_file() and not (killed / "README.md").exists()

    text = load_script("run_text_classification").main
    for more in ([], ["--learning_rate", "2e-3"]):  # not a finished run: neither replaced nor continued unasked
        message = refused(text, [*text_argv(killed), *more], [killed], "final save was interrupted")
        assert "pass --resume_from_checkpoint latest to finish it" in message
    assert run_text(killed, resume_from_checkpoint="latest").finished
    assert (killed / "README.md").is_file()
    weights, expected = saved_weights(killed), saved_weights(reference)
    assert weights.keys() == expected.keys() and all(torch.equal(weights[name], expected[name]) for name in weights)


def test_a_finished_run_names_how_to_replace_or_continue_it(finished_mlm_run):
    run, train = finished_mlm_run
    message = refused(load_script("run_mlm").main, mlm_argv(tiny_text_checkpoint(), train, run), [run, train],
                      "holds a finished run")
    assert ("pass --overwrite_output_dir to replace it whole with a new run (the folder stays as it is until the new "
            "run first saves), --resume_from_checkpoint latest --overwrite_output_dir to continue it") in message


# -- no run ends with status 0 and a NaN loss ---------------------------------------------------------------------

def test_a_run_that_masks_nothing_stops_naming_the_masking_options(tmp_path):
    train = texts_file(tmp_path / "data")
    mlm = load_script("run_mlm").main
    message = refused(mlm, mlm_argv(tiny_text_checkpoint(), train, tmp_path / "a", "--mlm_probability", "1e-9"),
                      [train], "No token of the training batch at step 1 was masked, so its loss is undefined")
    assert "--mlm_probability 1e-09 of blocks of --max_seq_length 16 tokens masks too few" in message
    assert not (tmp_path / "a" / "all_results.json").exists() and not (tmp_path / "a" / "README.md").exists()
    argv = [*mlm_argv(tiny_text_checkpoint(), train, tmp_path / "b", per_device_train_batch_size=1), "--max_seq_length",
            "1"]  # blocks of one token
    assert "--max_seq_length 1 tokens masks too few" in refused(mlm, argv, [train], "was masked")


def test_a_diverging_run_stops_and_keeps_its_last_good_checkpoint(tmp_path):
    train = texts_file(tmp_path / "data")
    message = refused(load_script("run_mlm").main, mlm_argv(tiny_text_checkpoint(), train, tmp_path / "out",
                                                            learning_rate=1e30, checkpointing_steps=1),
                      [train], "The training loss is nan at step 2: training diverged")
    assert "lower --learning_rate (now 1e+30)" in message
    assert sorted(path.name for path in (tmp_path / "out" / "checkpoints").iterdir()) == ["step_1"]
    assert read_state(tmp_path / "out" / "checkpoints" / "step_1").completed_steps == 1
    assert not (tmp_path / "out" / "model.safetensors").exists()


def test_a_mixed_precision_the_device_cannot_run_is_refused(tmp_path):
    train = texts_file(tmp_path / "data")
    env = {**os.environ, "ACCELERATE_MIXED_PRECISION": "fp16", "ACCELERATE_USE_CPU": "1", "OMP_NUM_THREADS": "1",
           "HF_HUB_OFFLINE": "1"}
    result = subprocess.run([sys.executable, str(REPO / "finetune" / "run_mlm.py"),
                             *mlm_argv(tiny_text_checkpoint(), train, tmp_path / "out")],
                            env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 2, result.stderr[-3000:]
    assert result.stderr.strip().splitlines()[-1] == (
        "run_mlm.py: error: Mixed precision fp16 (accelerate launch --mixed_precision, ACCELERATE_MIXED_PRECISION, or "
        "run_trainer.py --fp16) does not run on a CPU: Accelerate would train in float32 while the run reports fp16. "
        "Use bf16 (--mixed_precision bf16, --bf16) or no mixed precision.")
    assert not (tmp_path / "out").exists()
    with pytest.raises(ValueError, match="Mixed precision fp16 .* does not run on a CPU"):
        load_script("run_trainer").main(["--model_name_or_path", tiny_text_checkpoint(), "--task_name", "sst2",
                                         "--output_dir", str(tmp_path / "out"), "--use_cpu", "--fp16"])
    assert not (tmp_path / "out").exists()


# -- refused before the data, named for what it is -----------------------------------------------------------------

def test_refusals_that_need_no_data_come_before_it(finished_mlm_run, tmp_path, no_data_loads):
    from transformers import RobertaConfig, RobertaModel

    run, train = finished_mlm_run
    encoder = tmp_path / "encoder"  # an encoder without a masked-LM head
    RobertaModel(RobertaConfig.from_pretrained(tiny_text_checkpoint())).save_pretrained(encoder)
    tiny_tokenizer().save_pretrained(encoder)
    mlm = load_script("run_mlm").main
    refused(mlm, mlm_argv(encoder, train, tmp_path / "out"), [encoder, train], "has no masked-LM head")
    paused = copied(run, tmp_path / "paused")
    shutil.rmtree(paused / "checkpoints" / "step_4")
    for name in ("model.safetensors", "README.md", "all_results.json"):
        (paused / name).unlink()
    refused(mlm, mlm_argv(tiny_text_checkpoint(), train, paused, "--resume_from_checkpoint", "latest",
                          learning_rate=2e-3), [paused, train],
            r"Cannot resume from .*step_2: it was saved by a run with other settings: --learning_rate: 0.001 in the "
            r"checkpoint, 0.002 now\.")
    refused(mlm, mlm_argv(tiny_text_checkpoint(), train, tmp_path / "out", "--line_by_line", "--max_seq_length", "1"),
            [train], "--max_seq_length 1 leaves no room for text: the tokenizer adds 2 special tokens to each text "
            r"and cannot truncate below them. Use --max_seq_length 3 or more.")
    text = load_script("run_text_classification").main
    refused(text, text_argv(tmp_path / "out", "--max_length", "128"), [], "--max_length 128 is longer than the 32 tokens")
    refused(text, text_argv(tmp_path / "out", "--lora_target_modules", "query"), [], "applies to LoRA: pass --lora_r")
    kerformer = tmp_path / "kerformer"
    convert(tiny_text_checkpoint(), "kerformer", kerformer)
    refused(text, text_argv(tmp_path / "out", "--attention_transfer_steps", "2", model=kerformer), [kerformer],
            "has 'kerformer' attention, not softmax, so it cannot teach attention transfer")


def test_a_one_line_training_file_gets_its_own_message(tmp_path):
    train = texts_file(tmp_path / "data", lines=1)
    refused(load_script("run_mlm").main, mlm_argv(tiny_text_checkpoint(), train, tmp_path / "out"), [train],
            r"train.txt has 1 row: holding out --validation_split_percentage 10 for evaluation leaves none to train "
            r"on. Give a --validation_file, more rows, or a smaller --validation_split_percentage.")


def test_a_mistyped_local_folder_is_named_as_missing(tmp_path, capsys, monkeypatch):
    copied(tiny_text_checkpoint(), tmp_path / "tiny-bert")
    capsys.readouterr()  # the checkpoint's save
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(SystemExit) as exit:
        cli.main(["convert", "tiny-bertt", "--attention_type", "kerformer", "--output_dir", "out"])
    assert exit.value.code == 2
    assert capsys.readouterr().err == (
        "hf-effattn convert: error: Checkpoint tiny-bertt is neither a local folder (did you mean tiny-bert?) nor in "
        "the Hub cache, and HF_HUB_OFFLINE is set: download it while online first (hf download tiny-bertt), or give "
        "an existing folder.\n")
    monkeypatch.delenv("HF_HUB_OFFLINE")
    (tmp_path / "models").mkdir()
    with pytest.raises(FileNotFoundError, match=r"Tokenizer folder models/tiny-bertt not found: give an existing"):
        load_script("run_mlm").main(["--tokenizer_name", "models/tiny-bertt", *mlm_argv(
            tiny_text_checkpoint(), texts_file(tmp_path / "data"), tmp_path / "out")])
    assert sorted(path.name for path in tmp_path.iterdir()) == ["data", "models", "tiny-bert"]


def test_an_option_the_script_does_not_read_is_refused(tmp_path, capsys):
    train = texts_file(tmp_path / "data")
    with pytest.raises(SystemExit) as exit:
        load_script("run_mlm").main([*mlm_argv(tiny_text_checkpoint(), train, tmp_path / "out"),
                                     "--image_processor_name", tiny_vit_checkpoint()])
    assert exit.value.code == 2 and "unrecognized arguments: --image_processor_name" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        load_script("run_image_classification").main(["--model_name_or_path", tiny_vit_checkpoint(), "--tokenizer_name",
                                                      "x", "--output_dir", str(tmp_path / "out")])
    assert "unrecognized arguments: --tokenizer_name" in capsys.readouterr().err
    with pytest.raises(ValueError, match="image_processor_name"):  # Transformers' parser: unused arguments
        load_script("run_trainer").main(["--model_name_or_path", tiny_text_checkpoint(), "--image_processor_name", "x",
                                         "--output_dir", str(tmp_path / "out")])
    assert not (tmp_path / "out").exists()


# -- resuming ------------------------------------------------------------------------------------------------------

def test_a_resumed_run_reports_the_loss_of_the_whole_run(text_reference, tmp_path):
    reference, outcome = text_reference
    paused = run_text(tmp_path, stop_after_steps=3)  # in the middle of the first epoch
    assert not paused.finished
    resumed = run_text(tmp_path, resume_from_checkpoint="latest")
    assert resumed.state.history == outcome.state.history  # train_loss included
    assert (json.loads((tmp_path / "all_results.json").read_text())
            == json.loads((reference / "all_results.json").read_text()))


def test_gradient_checkpointing_may_be_added_on_resume(finished_mlm_run, tmp_path):
    reference, train = finished_mlm_run
    run_mlm(tiny_text_checkpoint(), train, tmp_path, stop_after_steps=2)
    assert run_mlm(tiny_text_checkpoint(), train, tmp_path, "--gradient_checkpointing", "--resume_from_checkpoint",
                   "latest").finished
    weights, expected = saved_weights(tmp_path), saved_weights(reference)
    assert all(torch.equal(weights[name], expected[name]) for name in expected)
