"""Checkpoints of a training run: the full Accelerate state (model weights as safetensors, optimizer,
scheduler, random number generators, sampler) plus ``training_state.json`` (the step reached, the run's
fingerprint, the evaluation history and the best result so far).

Checkpoints live under ``<output_dir>/checkpoints/`` (``step_<N>``, ``epoch_<N>``, and ``best``, the best
model by the task's main metric), apart from the Hub-ready files of the output folder, and are not uploaded.

A kill at any moment leaves no half-written checkpoint: each folder is written into a temporary sibling
(``.<name>.partial``) and renamed into place once complete; a folder it replaces is first moved aside
(``.<name>.replaced``) and removed afterwards (:func:`~hf_effattn.folders.folder_replacement.move_into_place`, as output
folders are written); the next run removes what a killed save left (:func:`remove_unfinished_saves`). ``latest``
takes only ``step_<N>`` and ``epoch_<N>`` folders, and skips, naming it in a warning, one whose training state is
missing or unreadable.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from ..folders.folder_replacement import PARTIAL_SUFFIX, REPLACED_SUFFIX, move_into_place, temporary_sibling
from ..folders.output_folders import CHECKPOINTS_DIR
from .fingerprint import fingerprint_differences

STATE_FILE = "training_state.json"
BEST_DIR = "best"
CHECKPOINT_NAME = re.compile(r"(step|epoch)_\d+")

logger = logging.getLogger(__name__)


@dataclass
class TrainingState:
    """What the loop knows beyond the Accelerate state: enough to resume exactly where it stopped, and the
    fingerprint (:mod:`.fingerprint`) of the run, which a resuming run must share."""

    completed_steps: int = 0
    fingerprint: dict = field(default_factory=dict)
    best_metric: float | None = None
    best_step: int | None = None
    history: list[dict] = field(default_factory=list)
    # The training loss summed over the batches of the epoch in progress, and their count, so that a run resumed in
    # the middle of an epoch reports the mean over the whole epoch.
    epoch_loss_sum: float = 0.0
    epoch_batches: int = 0

    @property
    def latest_eval(self) -> dict[str, dict[str, float]]:
        """The metrics of the latest evaluation, per split (empty before the first one)."""
        return self.history[-1]["eval"] if self.history else {}


def checkpoint_root(output_dir: str | Path) -> Path:
    """The folder under ``output_dir`` that holds the checkpoints."""
    return Path(output_dir) / CHECKPOINTS_DIR


def replace_folder(accelerator, folder: Path, write: Callable[[Path], None]) -> None:
    """Write ``folder`` anew, safe from kills: every process runs ``write(partial)`` into a temporary sibling,
    which the main process then renames into place once all are done."""
    partial = temporary_sibling(folder, PARTIAL_SUFFIX)
    if accelerator.is_main_process:
        shutil.rmtree(partial, ignore_errors=True)  # left by a save that was killed
    accelerator.wait_for_everyone()
    write(partial)
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        move_into_place(partial, folder)
    accelerator.wait_for_everyone()


def remove_unfinished_saves(output_dir: str | Path) -> None:
    """Remove the temporary folders that saves killed before they completed left under the checkpoints folder (a
    checkpoint killed between its renames is then missing, and ``latest`` takes an earlier one)."""
    root = checkpoint_root(output_dir)
    for suffix in (PARTIAL_SUFFIX, REPLACED_SUFFIX):
        for folder in root.glob(f".*{suffix}"):
            logger.info(f"Removing {folder}, left by a save that did not complete")
            shutil.rmtree(folder)


def save_checkpoint(accelerator, folder: Path, state: TrainingState) -> None:
    """Save the Accelerate state and (main process) the training state as the checkpoint ``folder``."""
    def write(partial: Path) -> None:
        accelerator.save_state(str(partial), safe_serialization=True)
        if accelerator.is_main_process:
            write_state(partial, state)

    replace_folder(accelerator, folder, write)


def write_state(folder: Path, state: TrainingState) -> None:
    """Write ``state`` as the training state of the checkpoint folder ``folder``."""
    (folder / STATE_FILE).write_text(json.dumps(asdict(state), indent=2))


def read_state(folder: Path) -> TrainingState:
    """The training state saved in a checkpoint folder; ``ValueError`` when it is missing or unreadable."""
    path = folder / STATE_FILE
    if not path.is_file():
        raise ValueError(f"{folder} is not a complete checkpoint (no {STATE_FILE})")
    try:
        return TrainingState(**json.loads(path.read_text()))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, TypeError) as error:
        raise ValueError(f"{path} is unreadable ({type(error).__name__}: {error})") from None


def latest_checkpoint(output_dir: str | Path) -> Path | None:
    """The complete checkpoint with the most steps under ``output_dir`` (``None`` if there is none); a checkpoint
    folder without a readable training state is skipped with a warning that names it."""
    root = checkpoint_root(output_dir)
    steps = {}
    for folder in sorted(root.iterdir()) if root.is_dir() else ():
        if CHECKPOINT_NAME.fullmatch(folder.name):
            try:
                steps[folder] = read_state(folder).completed_steps
            except ValueError as error:
                logger.warning(f"Skipping a checkpoint: {error}.")
    return max(steps, key=steps.get, default=None)


def resolve_checkpoint(requested: str, output_dir: str | Path) -> Path | None:
    """``--resume_from_checkpoint``: a checkpoint folder, or ``latest`` (``None`` when there is none yet)."""
    if requested == "latest":
        folder = latest_checkpoint(output_dir)
        if folder is None:
            logger.info(f"No checkpoint under {checkpoint_root(output_dir)} yet: starting from scratch.")
        return folder
    folder = Path(requested)
    try:
        read_state(folder)
    except ValueError as error:
        raise ValueError(f"--resume_from_checkpoint: {error}. Give a step_<N>/epoch_<N> folder under "
                         f"{checkpoint_root(output_dir)}, or 'latest'.") from None
    return folder


def check_resumable(saved: TrainingState, fingerprint: dict, max_steps: int | None, folder: Path,
                    partial: bool = False) -> None:
    """Raise when a run with ``fingerprint`` and a budget of ``max_steps`` optimizer steps (``None``: not known yet)
    would not continue the run that saved ``folder`` (``saved``) on the same path: each difference is named.
    ``partial``: ``fingerprint`` holds only the entries known so far (before the data loads), the ones compared."""
    problems = []
    if max_steps is not None and saved.completed_steps > max_steps:
        problems.append(f"it is at step {saved.completed_steps}, beyond this run's step budget of {max_steps}")
    differences = fingerprint_differences(saved.fingerprint, fingerprint, fingerprint.keys() if partial else None)
    if differences:
        problems.append("it was saved by a run with other settings: " + "; ".join(differences))
    if problems:
        raise ValueError(
            f"Cannot resume from {folder}: {'; and '.join(problems)}. A resumed run must see the same batches and "
            "take the same optimizer steps as the run it continues: resume with that run's settings, or start a "
            "new run (another --output_dir, or --overwrite_output_dir)."
        )
