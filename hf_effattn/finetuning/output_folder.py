"""Deprecated: the output folder's rule, the same for conversion and fine-tuning, is :mod:`hf_effattn.output_folders`
(and :func:`hf_effattn.finetuning.run.prepare_output_folder` applies it to a run). This module keeps the old names
working for one release, with a ``DeprecationWarning``. A new run with ``--overwrite_output_dir`` now replaces the
folder whole instead of removing the previous run's files first: :func:`remove_previous_run` is gone."""

from __future__ import annotations

from pathlib import Path

from ..deprecation import warn_moved
from ..output_folders import RESULTS_FILE, check_output_folder as check_folder, saved_model  # noqa: F401
from ..output_folders import MODEL_FILES as FINAL_WEIGHTS  # noqa: F401
from .arguments import run_inputs
from .checkpoints import remove_unfinished_saves  # noqa: F401

warn_moved("hf_effattn.finetuning.output_folder", "hf_effattn.output_folders")


def holds_finished_run(output_dir: str | Path) -> bool:
    """Whether ``output_dir`` holds the final model of a run."""
    return bool(saved_model(Path(output_dir)))


def check_output_folder(args) -> None:
    """Raise unless the run of ``args`` may write into ``--output_dir`` (:mod:`hf_effattn.output_folders`)."""
    check_folder(args.output_dir, run_inputs(args), args.overwrite_output_dir,
                 resuming=bool(args.resume_from_checkpoint))
