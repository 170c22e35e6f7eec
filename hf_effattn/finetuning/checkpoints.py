"""Checkpoints of a training run: the full Accelerate state (model weights as safetensors, optimizer,
scheduler, random number generators, sampler) plus ``training_state.json`` (the step reached, the
evaluation history and the best result so far).

``training_state.json`` is written last, so a folder without it (a run killed while saving) is never
taken for a checkpoint. Checkpoints live under ``<output_dir>/checkpoints/`` (``step_<N>``, ``epoch_<N>``,
and ``best``, the best model by the task's main metric), apart from the Hub-ready files of the output
folder, and are not uploaded.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

STATE_FILE = "training_state.json"
CHECKPOINTS_DIR = "checkpoints"
BEST_DIR = "best"


@dataclass
class TrainingState:
    """What the loop knows beyond the Accelerate state: enough to resume exactly where it stopped."""

    completed_steps: int = 0
    steps_per_epoch: int = 0
    num_processes: int = 1
    best_metric: float | None = None
    best_step: int | None = None
    history: list[dict] = field(default_factory=list)

    @property
    def latest_eval(self) -> dict[str, dict[str, float]]:
        """The metrics of the latest evaluation, per split (empty before the first one)."""
        return self.history[-1]["eval"] if self.history else {}


def checkpoint_root(output_dir: str | Path) -> Path:
    """The folder under ``output_dir`` that holds the checkpoints."""
    return Path(output_dir) / CHECKPOINTS_DIR


def save_checkpoint(accelerator, folder: Path, state: TrainingState) -> None:
    """Save the Accelerate state into ``folder``, then (main process) the training state that completes it."""
    accelerator.save_state(str(folder), safe_serialization=True)
    if accelerator.is_main_process:
        (folder / STATE_FILE).write_text(json.dumps(asdict(state), indent=2))
    accelerator.wait_for_everyone()


def read_state(folder: Path) -> TrainingState:
    """The training state saved in a checkpoint folder."""
    return TrainingState(**json.loads((folder / STATE_FILE).read_text()))


def latest_checkpoint(output_dir: str | Path) -> Path | None:
    """The complete checkpoint with the most steps under ``output_dir`` (``None`` if there is none)."""
    folders = [path.parent for path in checkpoint_root(output_dir).glob(f"*/{STATE_FILE}")]
    return max(folders, key=lambda folder: read_state(folder).completed_steps, default=None)


def resolve_checkpoint(requested: str, output_dir: str | Path) -> Path | None:
    """``--resume_from_checkpoint``: a checkpoint folder, or ``latest`` (``None`` when there is none yet)."""
    if requested == "latest":
        return latest_checkpoint(output_dir)
    folder = Path(requested)
    if not (folder / STATE_FILE).is_file():
        raise FileNotFoundError(
            f"{folder} is not a complete checkpoint (no {STATE_FILE}): give a step_<N>/epoch_<N> folder under "
            f"{checkpoint_root(output_dir)}, or 'latest'."
        )
    return folder


def check_compatible(saved: TrainingState, steps_per_epoch: int, num_processes: int, folder: Path) -> None:
    """Raise when the run resuming from ``folder`` would not see the same batches as the one that saved it."""
    if (saved.steps_per_epoch, saved.num_processes) != (steps_per_epoch, num_processes):
        raise ValueError(
            f"{folder} was saved by a run with {saved.steps_per_epoch} steps per epoch on {saved.num_processes} "
            f"process(es); this run has {steps_per_epoch} on {num_processes}. Resume with the same data, batch "
            "size, gradient accumulation and number of processes."
        )
