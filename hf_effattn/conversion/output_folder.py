"""Where :func:`~hf_effattn.conversion.convert.convert` may write, and how it writes there without losing anything.

The rules, checked before anything loads:

* the checkpoint's own folder is refused, and so are a folder that contains it and an existing folder inside it
  (replacing either would delete or change the checkpoint);
* a folder that is not empty is refused unless ``overwrite_output_dir`` (``--overwrite_output_dir``) is given;
  then it is replaced whole: none of its files survive beside the new ones.

The new folder is written into a hidden sibling (``.<name>.partial``) and renamed into place only once complete,
as the fine-tuning checkpoints are (:func:`~hf_effattn.finetuning.checkpoints.move_into_place`), so that a kill at
any moment leaves the previous folder or the complete new one. A kill in the instant between moving the previous
folder aside (``.<name>.replaced``) and renaming the new one in leaves the previous one there, whole: the next
conversion into the same folder puts it back before it checks the folder.
"""

from __future__ import annotations

import logging
import os
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from ..finetuning.checkpoints import PARTIAL_SUFFIX, REPLACED_SUFFIX, move_into_place, temporary_sibling

logger = logging.getLogger(__name__)


def prepare_output_folder(checkpoint: str, output_dir, overwrite_output_dir: bool) -> None:
    """Put back a folder that an interrupted conversion moved aside, then raise unless ``output_dir`` may be written
    (see the module's docstring)."""
    restore_interrupted(output_dir)
    check_output_folder(checkpoint, output_dir, overwrite_output_dir)


def restore_interrupted(output_dir) -> None:
    """Undo what a conversion into ``output_dir`` that was killed left: its unfinished new folder is removed; the
    previous folder it had moved aside is put back, or removed when the new one had reached its place."""
    folder = Path(output_dir)
    replaced = temporary_sibling(folder, REPLACED_SUFFIX)
    if replaced.is_dir():
        if folder.exists():
            shutil.rmtree(replaced)
        else:
            os.replace(replaced, folder)
            logger.warning(f"Put back {folder}, which a conversion killed while replacing it had moved aside.")
    shutil.rmtree(temporary_sibling(folder, PARTIAL_SUFFIX), ignore_errors=True)


def check_output_folder(checkpoint: str, output_dir, overwrite_output_dir: bool) -> None:
    """Raise ``ValueError`` unless the conversion of ``checkpoint`` may write ``output_dir``."""
    folder = Path(output_dir).resolve()
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"--output_dir {output_dir} is a file, not a folder: choose another --output_dir.")
    if Path(checkpoint).is_dir():
        source = Path(checkpoint).resolve()
        if folder == source:
            raise ValueError(f"--output_dir {output_dir} is the checkpoint's own folder: writing there would replace "
                             "the weights being converted. Choose another --output_dir.")
        if source.is_relative_to(folder):
            raise ValueError(f"--output_dir {output_dir} contains the checkpoint {checkpoint}: replacing it would "
                             "delete the checkpoint. Choose another --output_dir.")
        if folder.is_relative_to(source) and folder.exists():
            raise ValueError(f"--output_dir {output_dir} is part of the checkpoint {checkpoint}: replacing it would "
                             "change the checkpoint. Choose another --output_dir.")
    if folder.is_dir() and any(folder.iterdir()) and not overwrite_output_dir:
        raise ValueError(f"--output_dir {output_dir} is not empty: pass --overwrite_output_dir "
                         "(overwrite_output_dir=True) to replace it whole, or choose another --output_dir.")


@contextmanager
def written_into_place(output_dir) -> Iterator[Path]:
    """Yield an empty temporary folder beside ``output_dir``; once the block completes, it replaces ``output_dir``
    (which is left as it was if the block raises or the process dies first)."""
    folder = Path(output_dir)
    partial = temporary_sibling(folder, PARTIAL_SUFFIX)
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    try:
        yield partial
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    move_into_place(partial, folder)
