"""Where a command may write its output folder, and how it writes there without losing anything: one rule for
``hf-effattn convert``, the fine-tuning scripts (``finetune/run_*.py``) and ``hf-effattn demo``.

Checked before anything loads (:func:`check_output_folder`):

* the output folder may not be, contain or lie inside a local input of the command (the checkpoint or model, a
  checkpoint to resume from, a data file or dataset folder, a tokenizer or image processor), with or without
  ``--overwrite_output_dir``: writing there would change, replace or delete what the command reads. The message
  names the input and asks for another ``--output_dir``. A run's own checkpoints, which it resumes from, are not
  inputs of this kind: they are the folder's own content.
* a path that is a file is refused;
* a folder that holds files is written only by a command that continues what it holds (a fine-tuning run
  resumed with ``--resume_from_checkpoint``), or that replaces it (``--overwrite_output_dir``), and then *whole*:
  the new content is written apart (:class:`OutputFolder`) and put in its place once it holds something to put
  there: a conversion once complete, a training run at its first checkpoint or its final save. Until then the
  previous content is as it was; a command that fails or is killed before leaves it so.

Fine-tuning runs (``resumable``): a folder whose final model (:data:`MODEL_FILES`) is saved holds a *finished* run,
which only ``--overwrite_output_dir`` replaces (or, with ``--resume_from_checkpoint``, continues), unless the model
card that every run writes last (:data:`CARD_FILE`) is missing while the run's ``checkpoints/`` are there: then its
final save was *interrupted*, and ``--resume_from_checkpoint latest`` finishes it.

How a folder is replaced without loss on any filesystem (beside it and renamed, or in place for a symbolic link, a
mount point or the working directory), and how the next command puts right what a kill left, is
:mod:`hf_effattn.folders.folder_replacement`'s.
"""

from __future__ import annotations

import logging
import os
import shutil
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from .folder_replacement import PARTIAL_SUFFIX, commit_staging, restore_interrupted, staging_folder, temporary_sibling

CHECKPOINTS_DIR = "checkpoints"  # a fine-tuning run's checkpoints, under its output folder
RESULTS_FILE = "all_results.json"
CARD_FILE = "README.md"  # the model card: the last file a run's final save writes
MODEL_FILES = ("model.safetensors", "model.safetensors.index.json", "adapter_model.safetensors")  # LoRA: the adapter

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Input:
    """Something a command reads: ``what`` it is (``"model"``), the ``option`` that names it (``None`` for a
    positional argument) and its ``path`` (a Hub id or ``None`` when there is no local file or folder)."""

    what: str
    option: str | None
    path: str | Path | None

    def local_path(self) -> Path | None:
        """The input's resolved local path, or ``None`` where it is not on this machine (a Hub id, unset)."""
        return Path(self.path).resolve() if self.path is not None and Path(self.path).exists() else None


def check_not_an_input(output_dir, inputs: list[Input]) -> None:
    """Raise ``ValueError`` when ``output_dir`` is, contains or lies inside one of the local ``inputs``."""
    folder = Path(output_dir).resolve()
    for source in inputs:
        path = source.local_path()
        if path is None:
            continue
        named = f" ({source.option} {source.path})" if source.option else f" {source.path}"
        if folder == path:
            kind = "folder" if path.is_dir() else "file"
            raise ValueError(f"--output_dir {output_dir} is the {source.what}'s own {kind}"
                             f"{f' ({source.option})' if source.option else ''}: writing there would replace what "
                             "this command reads. Choose another --output_dir.")
        if path.is_relative_to(folder):
            raise ValueError(f"--output_dir {output_dir} contains the {source.what}{named}: replacing the folder would "
                             f"delete it. Choose another --output_dir, outside {source.path}.")
        if folder.is_relative_to(path):
            raise ValueError(f"--output_dir {output_dir} is part of the {source.what}{named}: writing there would "
                             f"change it. Choose another --output_dir, outside {source.path}.")


def prepare_output_folder(output_dir, inputs: list[Input], overwrite_output_dir: bool,
                          resuming: bool | None = None) -> bool:
    """Put right what a killed command left (:func:`~hf_effattn.folders.folder_replacement.restore_interrupted`), then
    :func:`check_output_folder`."""
    restore_interrupted(output_dir)
    return check_output_folder(output_dir, inputs, overwrite_output_dir, resuming)


def check_output_folder(output_dir, inputs: list[Input], overwrite_output_dir: bool,
                        resuming: bool | None = None) -> bool:
    """Raise ``ValueError`` unless the command may write ``output_dir`` (see the module's docstring); return whether it
    replaces the folder (which holds files the command does not continue).

    ``resuming``: ``None`` for a command that never continues a folder (a conversion); else whether this fine-tuning
    run continues the one saved there (``--resume_from_checkpoint``)."""
    folder = Path(output_dir)
    check_not_an_input(folder, inputs)
    if folder.is_symlink() and not folder.exists():
        raise ValueError(f"--output_dir {output_dir} is a link to {os.readlink(folder)}, which does not exist: create "
                         "that folder, or choose another --output_dir.")
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"--output_dir {output_dir} is a file, not a folder: choose another --output_dir.")
    if not folder.is_dir() or not any(folder.iterdir()):
        return False
    if resuming is None:
        if not overwrite_output_dir:
            raise ValueError(f"--output_dir {output_dir} is not empty: pass --overwrite_output_dir "
                             "(overwrite_output_dir=True) to replace it whole, or choose another --output_dir.")
        return True
    check_run_folder(folder, overwrite_output_dir, resuming)
    return not resuming


def saved_model(folder: Path) -> list[str]:
    """The final model files that ``folder`` holds (none before a run's final save)."""
    return [name for name in MODEL_FILES if (folder / name).is_file()]


def final_save_interrupted(folder: Path) -> bool:
    """Whether ``folder`` holds a fine-tuning run whose final save was interrupted: its final model (or part of it)
    and its checkpoints, but not the model card written last."""
    return bool(saved_model(folder)) and (folder / CHECKPOINTS_DIR).is_dir() and not (folder / CARD_FILE).exists()


def check_run_folder(folder: Path, overwrite_output_dir: bool, resuming: bool) -> None:
    """Raise unless a fine-tuning run may write ``folder``, which holds files: a finished run only with
    ``--overwrite_output_dir``, any other content with it or with ``--resume_from_checkpoint``."""
    interrupted = final_save_interrupted(folder)
    if saved_model(folder) and not interrupted and not overwrite_output_dir:
        raise ValueError(
            f"--output_dir {folder} holds a finished run (its final model, {', '.join(saved_model(folder))}, is "
            "saved): pass --overwrite_output_dir to replace it whole with a new run (the folder stays as it is "
            "until the new run first saves), --resume_from_checkpoint latest --overwrite_output_dir to continue it "
            "(its final files are written anew), or choose another --output_dir.")
    if overwrite_output_dir or resuming:
        return
    if interrupted:
        raise ValueError(
            f"--output_dir {folder} holds a run whose final save was interrupted ({', '.join(saved_model(folder))} "
            "without its model card): pass --resume_from_checkpoint latest to finish it, --overwrite_output_dir to "
            "replace it whole with a new run, or choose another --output_dir.")
    raise ValueError(f"--output_dir {folder} is not empty: pass --resume_from_checkpoint latest to continue the run "
                     "saved there, --overwrite_output_dir to replace it whole with a new run, or choose another "
                     "--output_dir.")


@dataclass
class OutputFolder:
    """Where a command writes the folder ``final``: in place, or, while it replaces a previous folder, into the
    ``staging`` folder beside it (inside it for a symbolic link, a mount point or the working directory), which
    :meth:`commit` puts in its place."""

    final: Path
    staging: Path | None = None

    @classmethod
    def replacing(cls, final, replaces: bool) -> "OutputFolder":
        """Write ``final`` in place, or, when ``replaces``, into a new staging folder
        (:func:`~hf_effattn.folders.folder_replacement.staging_folder`)."""
        final = Path(final)
        return cls(final, staging_folder(final) if replaces else None)

    @property
    def path(self) -> Path:
        """Where to write now."""
        return self.staging or self.final

    def final_path(self, path: Path) -> Path:
        """Where ``path``, written under :attr:`path`, will be once in place (for files that name their place)."""
        return self.final / Path(path).relative_to(self.path)

    def commit(self, main_process: bool = True) -> None:
        """Put the staging folder in place of ``final``, whole (the main process moves it; every process then writes
        in place). Does nothing once in place. A move that fails keeps the new content, named in the ``OSError``."""
        if self.staging is None:
            return
        if main_process:
            commit_staging(self.staging, self.final)
            logger.info(f"Replaced {self.final} whole with the new folder.")
        self.staging = None

    def discard(self, main_process: bool = True) -> None:
        """Remove the staging folder of a command that failed: ``final`` stays as it was."""
        if self.staging is not None and main_process:
            shutil.rmtree(self.staging, ignore_errors=True)


def check_output_file(option: str, path, overwrite: bool = False) -> None:
    """``--<option> path``, a file a command writes when it ends: refused at once, not after the work, when it is a
    folder, its folder does not exist, or it exists (a finished run's result) and ``overwrite`` is not given."""
    path = Path(path)
    if path.exists() and not path.is_dir() and not overwrite:
        raise ValueError(f"--{option} {path} exists (a finished run's result): give another file, or pass "
                         f"--overwrite_{option} to replace it.")
    if path.is_dir():
        raise ValueError(f"--{option} {path} is a folder: give a file name, e.g. {path / 'metrics.json'}.")
    if not path.parent.is_dir():
        raise ValueError(f"--{option} {path}: there is no folder {path.parent}: create it, or give a file in an "
                         "existing folder.")


def write_file_into_place(path, text: str) -> None:
    """Write ``text`` to ``path`` whole: into a hidden sibling first, renamed over ``path`` once complete, so that a
    kill leaves the previous file or the new one."""
    path = Path(path)
    partial = temporary_sibling(path, PARTIAL_SUFFIX)
    partial.write_text(text)
    os.replace(partial, path)


@contextmanager
def written_into_place(output_dir) -> Iterator[Path]:
    """Yield an empty folder beside ``output_dir``; once the block completes, it replaces ``output_dir`` whole
    (which is left as it was if the block raises or the process dies first)."""
    folder = OutputFolder.replacing(output_dir, replaces=True)
    shutil.rmtree(folder.staging, ignore_errors=True)
    folder.staging.mkdir(parents=True)
    try:
        yield folder.staging
    except BaseException:
        folder.discard()
        raise
    folder.commit()
