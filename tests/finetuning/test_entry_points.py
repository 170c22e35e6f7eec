"""Training without a clone of the repository: each script's module of the installed package runs with ``python -m``
and ``accelerate launch -m`` (``--help`` included), from any folder, and takes its options from Python as keyword
arguments (``train(...)``), checked as the command line checks them; the ``finetune/`` scripts stay thin files that
call the module's ``main``."""

from __future__ import annotations

import ast
import os
import subprocess
import sys

import pytest
from helpers.finetuning import one_torch_thread  # noqa: F401 (autouse: one torch thread)
from helpers.finetuning import (
    MAX_LENGTH,
    REPO,
    assert_same_weights,
    glue_mirror,
    text_file,
    tiny_text_checkpoint,
    training_options,
)

from hf_effattn.finetuning import masked_lm, text_classification, text_classification_trainer

MODULES = {  # finetune/ script -> the package module it runs
    "run_text_classification.py": "hf_effattn.finetuning.text_classification",
    "run_image_classification.py": "hf_effattn.finetuning.image_classification",
    "run_mlm.py": "hf_effattn.finetuning.masked_lm",
    "run_trainer.py": "hf_effattn.finetuning.text_classification_trainer",
}
# Runs each module as `python -m` does, with --help, in one interpreter.
HELP_OF_EACH = """
import runpy, sys
for module in sys.argv[1:]:
    sys.argv = [module, "--help"]
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as exit:
        print(f"{module} exited with {exit.code}")
"""


def outside_the_checkout() -> dict:
    """An environment where only the installed package is importable (no PYTHONPATH into the repository)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return env | {"HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "ACCELERATE_USE_CPU": "1"}


def test_every_script_is_a_thin_file_that_runs_its_package_module():
    for script, module in MODULES.items():
        tree = ast.parse((REPO / "finetune" / script).read_text())
        imports = [node for node in tree.body if isinstance(node, ast.ImportFrom)]
        assert [(node.module, [alias.name for alias in node.names]) for node in imports] == [
            (module, ["main"]), ("hf_effattn.options.user_errors", ["run_script"])], script
    assert sorted(path.name for path in (REPO / "finetune").glob("*.py")) == sorted(MODULES)


def test_every_module_prints_its_help_under_python_m(tmp_path):
    result = subprocess.run([sys.executable, "-c", HELP_OF_EACH, *MODULES.values()], cwd=tmp_path,
                            env=outside_the_checkout(), capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    for module in MODULES.values():
        assert f"usage: python -m {module}" in result.stdout, module
        assert f"{module} exited with 0" in result.stdout
    assert result.stdout.count("--model_name_or_path MODEL_NAME_OR_PATH") >= len(MODULES)


def test_accelerate_launch_m_trains_from_the_installed_package(tmp_path):
    train = text_file(tmp_path, [f"w{i} w{i + 1} a{i % 4} w{i + 2} w3 w4 w5" for i in range(24)])
    command = [sys.executable, "-m", "accelerate.commands.launch", "--num_processes", "1", "--num_machines", "1",
               "--mixed_precision", "no", "--dynamo_backend", "no", "-m", "hf_effattn.finetuning.masked_lm",
               "--model_name_or_path", tiny_text_checkpoint(), "--train_file", train, "--max_seq_length", "16",
               "--max_train_steps", "2", "--per_device_train_batch_size", "4", "--output_dir", str(tmp_path / "out")]
    result = subprocess.run(command, cwd=tmp_path, env=outside_the_checkout(), capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert (tmp_path / "out" / "model.safetensors").is_file() and (tmp_path / "out" / "README.md").is_file()
    refused = subprocess.run([*command[:-2], "--mlm_probability", "2"], cwd=tmp_path, env=outside_the_checkout(),
                             capture_output=True, text=True, timeout=300)
    assert refused.returncode != 0
    assert "python -m hf_effattn.finetuning.masked_lm: error: argument --mlm_probability" in refused.stderr


def test_keyword_arguments_train_as_the_same_command_line_does(tmp_path):
    options = {"model_name_or_path": tiny_text_checkpoint(), "attention_type": "kerformer",
               "attention_config": {"se_mode": "channel"}, "task_name": "sst2", "dataset_name": glue_mirror(),
               "max_length": MAX_LENGTH, "max_train_steps": 2, "local_window": 4}
    outcome = text_classification.train(**options, output_dir=tmp_path / "keywords", per_device_train_batch_size=8,
                                        learning_rate=1e-3, seed=0, pad_to_max_length=True)
    argv = ["--model_name_or_path", tiny_text_checkpoint(), "--attention_type", "kerformer", "--attention_config",
            '{"se_mode": "channel"}', "--task_name", "sst2", "--dataset_name", glue_mirror(), "--max_length",
            str(MAX_LENGTH), "--max_train_steps", "2", "--local_window", "4", "--pad_to_max_length",
            *training_options(tmp_path / "argv")]
    reference = text_classification.main(argv)
    assert outcome.final_metrics == reference.final_metrics and outcome.state.history == reference.state.history
    assert_same_weights(tmp_path / "keywords", tmp_path / "argv")


@pytest.mark.parametrize("entry", [text_classification.train, masked_lm.train, text_classification_trainer.train],
                         ids=["text_classification", "masked_lm", "text_classification_trainer"])
def test_keyword_arguments_are_checked_as_the_command_line_checks_them(entry, tmp_path):
    required = {"model_name_or_path": tiny_text_checkpoint(), "output_dir": tmp_path / "out"}
    with pytest.raises(TypeError, match=r"Unknown option max_train_step=2\. Did you mean .*max_(train_)?steps"):
        entry(**required, max_train_step=2)
    with pytest.raises(ValueError, match=r"per_device_train_batch_size.*(>= 1|at least 1)"):
        entry(**required, per_device_train_batch_size=0)
    with pytest.raises(ValueError, match=r"the following arguments are required: --model_name_or_path"):
        entry(output_dir=tmp_path / "out")
    assert not (tmp_path / "out").exists()
