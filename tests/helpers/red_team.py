"""The red-team tests' tiny runs (``tests/finetuning/test_red_team.py``): a texts file, ``run_mlm.py`` and
``run_text_classification.py`` options and runs on tiny checkpoints, a refusal that must leave every input
byte-for-byte unchanged, and the runs the tests share (fixtures, imported by the test module)."""

from __future__ import annotations

import random
import re
import shutil
from pathlib import Path

import datasets
import pytest

from helpers.finetuning import (
    MAX_LENGTH,
    NUM_WORDS,
    contents,
    glue_mirror,
    load_script,
    tiny_text_checkpoint,
    training_options,
)

from hf_effattn.commands import main as cli


def texts_file(folder: Path, lines: int = 60, name: str = "train.txt") -> Path:
    """``lines`` paragraphs of task words, one per line."""
    rng = random.Random(0)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("".join(" ".join(f"w{rng.randrange(NUM_WORDS)}" for _ in range(rng.randint(3, 24))) + "\n"
                            for _ in range(lines)))
    return path


def mlm_argv(model, train_file, output_dir, *more: str, **overrides) -> list[str]:
    """A tiny ``run_mlm.py`` run: blocks of 16 tokens, 4 per step, a checkpoint every 2 steps, 4 steps."""
    options = {"per_device_train_batch_size": 4, "checkpointing_steps": 2, "max_train_steps": 4, **overrides}
    return ["--model_name_or_path", str(model), "--train_file", str(train_file), "--max_seq_length", "16", *more,
            *training_options(output_dir, **options)]


def run_mlm(*args, **overrides):
    return load_script("run_mlm").main(mlm_argv(*args, **overrides))


def text_argv(output_dir, *more: str, model=None, **overrides) -> list[str]:
    """A tiny ``run_text_classification.py`` run on SST-2: 4 steps per epoch, 2 epochs, a checkpoint every 2 steps."""
    options = {"num_train_epochs": 2, "checkpointing_steps": 2, **overrides}
    return ["--model_name_or_path", str(model or tiny_text_checkpoint(dropout=0.1)), "--task_name", "sst2",
            "--dataset_name", glue_mirror(), "--max_length", str(MAX_LENGTH), *more,
            *training_options(output_dir, **options)]


def trainer_argv(out, *more: str) -> list[str]:
    """A tiny ``run_trainer.py`` run on SST-2, on the CPU, Kerformer beside nothing."""
    return ["--model_name_or_path", tiny_text_checkpoint(), "--attention_type", "kerformer", "--task_name", "sst2",
            "--dataset_name", glue_mirror(), "--max_length", str(MAX_LENGTH), "--output_dir", str(out), "--use_cpu",
            "--report_to", "none", *more]


def run_text(*args, **overrides):
    return load_script("run_text_classification").main(text_argv(*args, **overrides))


def refused(run, argv: list[str], inputs: list[Path], match: str, error=ValueError) -> str:
    """Run ``run(argv)``; assert it raises ``error`` matching ``match`` and leaves every input (folder, or a file's
    folder) byte-for-byte as it was; return the message."""
    folders = [path if path.is_dir() else path.parent for path in inputs]
    before = [contents(folder) for folder in folders]
    with pytest.raises(error, match=match) as refusal:
        run(argv)
    assert [contents(folder) for folder in folders] == before
    return str(refusal.value)


def cli_refused(capsys, argv: list[str], inputs: list[Path], match: str) -> str:
    """Run ``hf-effattn ARGV``; assert exit status 2, its last line on stderr (after any progress bars) the one
    error line, matching ``match``, and every input (folder, or a file's folder) byte-for-byte as it was; return
    the line."""
    folders = [path if path.is_dir() else path.parent for path in inputs]
    before = [contents(folder) for folder in folders]
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit:
        cli.main(argv)
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert exit.value.code == 2 and error.startswith(f"hf-effattn {argv[0]}: error: ") and re.search(match, error), \
        error
    assert [contents(folder) for folder in folders] == before
    return error


def copied(source, destination: Path) -> Path:
    """A copy of the folder ``source`` at ``destination``, for a test that may try to damage it."""
    return Path(shutil.copytree(source, destination))


@pytest.fixture(scope="module")
def finished_mlm_run(tmp_path_factory) -> tuple[Path, Path]:
    """A finished ``run_mlm.py`` run (checkpoints step_2, step_4, best; model, results, card) and its texts."""
    root = tmp_path_factory.mktemp("mlm")
    train = texts_file(root / "data")
    assert run_mlm(tiny_text_checkpoint(), train, root / "run").finished
    return root / "run", train


@pytest.fixture(scope="module")
def text_reference(tmp_path_factory) -> tuple[Path, object]:
    """An uninterrupted text classification run (8 steps, checkpoints every 2) and its outcome."""
    folder = tmp_path_factory.mktemp("reference") / "run"
    return folder, run_text(folder)


@pytest.fixture
def no_data_loads(monkeypatch):
    """Loading a dataset fails the test: what is refused is refused before the data."""
    def load_dataset(*args, **kwargs):
        raise AssertionError("the data was loaded before the refusal")

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
