"""Deprecated: the output folder's rule, the same for conversion and fine-tuning, is :mod:`hf_effattn.output_folders`.
This module keeps the old names working for one release, with a ``DeprecationWarning``."""

from __future__ import annotations

from .. import output_folders
from ..deprecation import warn_moved
from ..output_folders import restore_interrupted, written_into_place  # noqa: F401

warn_moved("hf_effattn.conversion.output_folder", "hf_effattn.output_folders")


def prepare_output_folder(checkpoint: str, output_dir, overwrite_output_dir: bool) -> None:
    """:func:`hf_effattn.output_folders.prepare_output_folder` for a conversion of ``checkpoint``."""
    output_folders.prepare_output_folder(output_dir, [output_folders.Input("checkpoint", None, checkpoint)],
                                         overwrite_output_dir)


def check_output_folder(checkpoint: str, output_dir, overwrite_output_dir: bool) -> None:
    """:func:`hf_effattn.output_folders.check_output_folder` for a conversion of ``checkpoint``."""
    output_folders.check_output_folder(output_dir, [output_folders.Input("checkpoint", None, checkpoint)],
                                       overwrite_output_dir)
