"""How a folder's content is replaced whole, on any filesystem, without losing anything: the new content is written
apart and put in place once complete, the previous content kept until then.

Two ways, chosen per folder (:func:`replaced_in_place`):

* *beside* (an ordinary folder): the new folder is written beside it (``.<name>.partial``) and renamed into its place,
  the previous one moved aside first (``.<name>.replaced``) and removed after (:func:`move_into_place`);
* *in place*, for a folder that must not or cannot be renamed: a symbolic link (its target is the user's, and the
  link must stay), a mount point (a Docker volume, a network share: renaming it fails with ``EBUSY``), or the working
  directory or a folder that holds it (renaming would move it away from under the process and the user's shell).
  The new content is written inside the folder (``<folder>/.<name>.partial``); then the previous entries are moved
  into ``<folder>/.<name>.replaced`` and the new ones out of the staging folder (:func:`swap_contents`). A rename
  that fails all the same (a bind mount of a folder of the same filesystem looks like any folder) falls back to
  this way.

Once the new content is complete its staging folder is renamed ``.<name>.complete``: from then on it is what the
folder will hold. A kill at any moment leaves the previous content in place (the new one unfinished: the next command
writing there removes it), or a complete new content, which the next command writing there puts in place first
(:func:`restore_interrupted`). A move that fails for another reason (a full disk, a permission) raises an ``OSError``
that names where the complete new content is kept.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

PARTIAL_SUFFIX = ".partial"  # the new content, being written
COMPLETE_SUFFIX = ".complete"  # the new content, complete, not yet in place
REPLACING_SUFFIX = ".replacing"  # in place: the previous entries, being moved aside
REPLACED_SUFFIX = ".replaced"  # the previous content, all moved aside, removed once the new one is in place
SUFFIXES = (PARTIAL_SUFFIX, COMPLETE_SUFFIX, REPLACING_SUFFIX, REPLACED_SUFFIX)

logger = logging.getLogger(__name__)


def absolute(folder) -> Path:
    """``folder`` as an absolute path whose last part is kept as given (a symbolic link is not followed), so that
    ``.`` has a name."""
    return Path(os.path.abspath(folder))


def temporary_sibling(folder, suffix: str) -> Path:
    """A hidden folder beside ``folder``: ``.<name><suffix>``."""
    folder = absolute(folder)
    return folder.with_name(f".{folder.name}{suffix}")


def temporary_inside(folder, suffix: str) -> Path:
    """A hidden folder inside ``folder``, for a folder replaced in place: ``<folder>/.<name><suffix>``."""
    folder = absolute(folder)
    return folder / f".{folder.name}{suffix}"


def replaced_in_place(folder) -> bool:
    """Whether ``folder`` is replaced in place rather than renamed: a symbolic link, a mount point, or the working
    directory or a folder that holds it (see the module docstring)."""
    folder = absolute(folder)
    return folder.is_symlink() or os.path.ismount(folder) or Path.cwd().is_relative_to(folder.resolve())


def staging_folder(folder) -> Path:
    """Where the new content of ``folder`` is written: beside it, or inside it when it is replaced in place."""
    return (temporary_inside if replaced_in_place(folder) else temporary_sibling)(folder, PARTIAL_SUFFIX)


def move_into_place(partial: Path, folder: Path) -> None:
    """Rename the complete folder ``partial`` to ``folder``; an existing ``folder`` is moved aside first and removed
    after, so that a kill in between leaves ``folder`` missing and its previous content whole beside it. A rename that
    fails puts the previous folder back before it raises."""
    replaced = temporary_sibling(folder, REPLACED_SUFFIX)
    shutil.rmtree(replaced, ignore_errors=True)
    if folder.exists():
        os.replace(folder, replaced)
    try:
        os.replace(partial, folder)
    except OSError:
        if replaced.exists():
            os.replace(replaced, folder)
        raise
    shutil.rmtree(replaced, ignore_errors=True)


def own_entries(folder: Path) -> list[Path]:
    """The entries of ``folder`` but the hidden folders of its replacement (:data:`SUFFIXES`)."""
    ours = {temporary_inside(folder, suffix).name for suffix in SUFFIXES}
    return [entry for entry in folder.iterdir() if entry.name not in ours]


def swap_contents(complete: Path, folder: Path) -> None:
    """Replace the entries of ``folder`` with those of the complete folder ``complete``, in place: the previous ones
    moved into ``.<name>.replaced`` inside it, the new ones moved in (copied where ``complete`` lies on another
    filesystem), then the previous ones removed. Run again after a kill, it finishes the swap."""
    folder = absolute(folder)
    replacing, replaced = (temporary_inside(folder, suffix) for suffix in (REPLACING_SUFFIX, REPLACED_SUFFIX))
    folder.mkdir(parents=True, exist_ok=True)
    if not replaced.exists():
        replacing.mkdir(exist_ok=True)
        for entry in own_entries(folder):
            os.replace(entry, replacing / entry.name)
        os.replace(replacing, replaced)
    for entry in list(complete.iterdir()):
        remove(folder / entry.name)  # an entry whose move a kill interrupted
        shutil.move(entry, folder / entry.name)
    complete.rmdir()
    shutil.rmtree(replaced)


def remove(path: Path) -> None:
    """Remove the file, link or folder ``path``, if there is one."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def put_in_place(complete: Path, folder) -> None:
    """Put the complete new content ``complete`` (a ``.complete`` folder beside or inside ``folder``) in place of
    ``folder``'s, by a rename where it can, else in place; an ``OSError`` that names where the new content is kept
    when neither works."""
    folder = absolute(folder)
    try:
        if complete.parent == folder or replaced_in_place(folder):
            swap_contents(complete, folder)
            return
        try:
            move_into_place(complete, folder)
        except OSError as error:
            logger.warning(f"Could not rename {complete} to {folder} ({error}): moving its files in instead.")
            swap_contents(complete, folder)
    except OSError as error:
        raise OSError(f"Could not put the new content of {folder} in place ({error}): it is kept, complete, in "
                      f"{complete}. Put the cause right; the next command that writes {folder} puts it in place first "
                      "(a fine-tuning run's checkpoints then resume with --resume_from_checkpoint latest), or move its "
                      f"files into {folder} yourself.") from error


def commit_staging(staging: Path, folder) -> None:
    """The staging folder ``staging`` is complete: mark it so (renamed ``.complete``), then put it in place of
    ``folder`` (:func:`put_in_place`)."""
    complete = staging.with_name(staging.name[: -len(PARTIAL_SUFFIX)] + COMPLETE_SUFFIX)
    os.replace(staging, complete)
    put_in_place(complete, folder)


def restore_interrupted(output_dir) -> None:
    """Put right what a command killed while writing ``output_dir`` left: its unfinished new content is removed; a
    complete one is put in place; a previous folder moved aside is put back, or removed when the new one is in
    place."""
    folder = absolute(output_dir)
    places = [temporary_sibling] + ([temporary_inside] if folder.is_dir() else [])
    for hidden in places:
        shutil.rmtree(hidden(folder, PARTIAL_SUFFIX), ignore_errors=True)
        complete = hidden(folder, COMPLETE_SUFFIX)
        if complete.is_dir():
            put_in_place(complete, folder)
            logger.warning(f"Put in place the new content of {folder}, complete in {complete}, that a command "
                           "stopped before it could move it.")
    replaced = temporary_sibling(folder, REPLACED_SUFFIX)
    if replaced.is_dir() and not folder.exists():
        os.replace(replaced, folder)
        logger.warning(f"Put back {folder}, which a command killed while replacing it had moved aside.")
    for hidden in places:
        shutil.rmtree(hidden(folder, REPLACED_SUFFIX), ignore_errors=True)
