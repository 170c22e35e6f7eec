"""What a run may do with an ``--output_dir`` that already holds files.

As Transformers' example scripts do, a run refuses an output folder that is not empty, unless it continues
the run saved there (``--resume_from_checkpoint``) or replaces it (``--overwrite_output_dir``). A finished run
(its final model saved) is never continued silently either: resuming into it also takes
``--overwrite_output_dir``, since the resumed run rewrites its final files.

A new run with ``--overwrite_output_dir`` first removes the previous run's checkpoints (``best`` included), final
weights (after LoRA, the adapter and its ``base_model/``), results, attention-transfer report and tracker logs, so
that neither ``latest`` nor the folder mixes two runs; the previous run's other Hub-ready files (config, tokenizer
or image processor, model card) are replaced when the new run finishes, and files that no run writes are left alone.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

from ..conversion.transfer import REPORT_FILE
from .checkpoints import CHECKPOINTS_DIR, PARTIAL_SUFFIX, REPLACED_SUFFIX, checkpoint_root
from .loop import TRACKER_PROJECT
from .lora import BASE_DIR

RESULTS_FILE = "all_results.json"
FINAL_WEIGHTS = ("model.safetensors", "model.safetensors.index.json", "adapter_model.safetensors")  # LoRA: the adapter
TRAINER_ENTRIES = ("checkpoint-*", "runs")  # finetune/run_trainer.py: Trainer's checkpoints and tensorboard logs
PREVIOUS_RUN_ENTRIES = (CHECKPOINTS_DIR, TRACKER_PROJECT, *FINAL_WEIGHTS, "model-*-of-*.safetensors", BASE_DIR,
                        RESULTS_FILE, REPORT_FILE, *TRAINER_ENTRIES)

logger = logging.getLogger(__name__)


def holds_finished_run(output_dir: str | Path) -> bool:
    """Whether ``output_dir`` holds the final model of a run."""
    return any((Path(output_dir) / name).is_file() for name in FINAL_WEIGHTS)


def check_output_folder(args) -> None:
    """Raise unless the run of ``args`` may write into ``--output_dir`` (see the module's docstring)."""
    folder = Path(args.output_dir)
    if args.overwrite_output_dir or not folder.is_dir() or not any(folder.iterdir()):
        return
    if holds_finished_run(folder):
        raise ValueError(f"--output_dir {folder} holds a finished run (its final model is saved): pass "
                         "--overwrite_output_dir to replace it, or choose another --output_dir.")
    if not args.resume_from_checkpoint:
        raise ValueError(f"--output_dir {folder} is not empty: pass --resume_from_checkpoint latest to continue the "
                         "run saved there, --overwrite_output_dir to start a new one in its place, or choose another "
                         "--output_dir.")


def prepare_output_folder(args, accelerator) -> None:
    """Check ``--output_dir`` on every process; then (main process) remove what a killed save left behind, and, for a
    new run with ``--overwrite_output_dir``, the previous run's checkpoints and results."""
    check_output_folder(args)
    if accelerator.is_main_process:
        if args.overwrite_output_dir and not args.resume_from_checkpoint:
            remove_previous_run(args.output_dir)
        remove_unfinished_saves(args.output_dir)
    accelerator.wait_for_everyone()


def remove_previous_run(output_dir: str | Path) -> None:
    """Remove the checkpoints, final weights, results, transfer report and tracker logs of the run in ``output_dir``."""
    removed = [path for pattern in PREVIOUS_RUN_ENTRIES for path in Path(output_dir).glob(pattern)]
    for path in removed:
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink()
    if removed:
        logger.info(f"--overwrite_output_dir: removed the previous run's {', '.join(path.name for path in removed)}")


def remove_unfinished_saves(output_dir: str | Path) -> None:
    """Remove the temporary folders that saves killed before they completed left under the checkpoints folder."""
    root = checkpoint_root(output_dir)
    for suffix in (PARTIAL_SUFFIX, REPLACED_SUFFIX):
        for folder in root.glob(f".*{suffix}"):
            logger.info(f"Removing {folder}, left by a save that did not complete")
            shutil.rmtree(folder)
