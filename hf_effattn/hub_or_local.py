"""A name that a command reads, a Hub id or a local file or folder: whether the Hub is offline
(:func:`hub_offline`), and a local folder that does not exist refused with the closest entries of its parent
(:func:`check_found`), rather than sent to the Hub, whose complaint would be about the id's form or a failed
connection; offline, a Hub id the cache lacks refused with the download that fills it; a file refused for the folder
that holds it. ``hf-effattn convert`` and the fine-tuning scripts check their inputs with it before anything loads."""

from __future__ import annotations

import difflib
import os
from pathlib import Path

from huggingface_hub.utils import HFValidationError, validate_repo_id

TRUE_VALUES = {"1", "on", "yes", "true"}


def hub_offline() -> bool:
    """Whether ``HF_HUB_OFFLINE`` is set, read now (``huggingface_hub`` reads it once, at import)."""
    from huggingface_hub import constants

    return constants.HF_HUB_OFFLINE or os.environ.get("HF_HUB_OFFLINE", "").lower() in TRUE_VALUES


def check_found(name, what: str = "Checkpoint", hub_cache: bool = True) -> None:
    """Raise ``FileNotFoundError`` for a local folder that does not exist, rather than sending its name to the Hub
    (whose complaint would be about the id's form, or a failed connection): a name that cannot be a Hub id (``./model``,
    ``/data/model``), one inside a local folder that exists (``outputs/run1``), and, offline (``HF_HUB_OFFLINE``),
    one of a model that the Hub cache lacks (``hub_cache``; datasets keep a cache of their own): the message names the
    closest entries of the folder it would be in, and offline the download that fills the cache. Raise
    ``NotADirectoryError`` for a file (``model/config.json``), which Transformers would try to read as a config or as
    weights. ``what``: what the name is (``Checkpoint``, ``Tokenizer``, ...)."""
    path = Path(name)
    if path.is_file():
        raise NotADirectoryError(f"{what} {name} is a file, not a folder: give the folder that holds it (did you mean "
                                 f"{path.parent}?), or a Hub id.")
    offline = hub_cache and missing_offline(str(name))
    if path.exists() or not (looks_local(path) or offline):
        return
    if offline:
        raise FileNotFoundError(f"{what} {name} is neither a local folder{closest_entries(path)} nor in the Hub cache, "
                                f"and HF_HUB_OFFLINE is set: download it while online first (hf download {name}), or "
                                "give an existing folder.")
    raise FileNotFoundError(f"{what} folder {name} not found{closest_entries(path)}: give an existing folder, or a Hub "
                            "id such as FacebookAI/roberta-base.")


def check_hub_id(name: str | None) -> None:
    """Raise ``ValueError`` unless ``name`` (when given) has the form of a Hub model id, ``user/name`` or ``name``."""
    if name is None:
        return
    try:
        validate_repo_id(name)
    except HFValidationError:
        raise ValueError(f"{name!r} is not a Hub id: give one such as sentence-transformers/all-MiniLM-L6-v2.") from None


def looks_local(path: Path) -> bool:
    """Whether ``path`` names a local file or folder rather than a Hub id: it cannot be a Hub id, or its first part
    is a local folder."""
    try:
        validate_repo_id(str(path))
    except HFValidationError:
        return True
    return len(path.parts) > 1 and Path(path.parts[0]).is_dir()


def missing_offline(name: str) -> bool:
    """Whether, offline, ``name`` is the id of a model repository that the Hub cache holds nothing of."""
    from huggingface_hub import constants
    from huggingface_hub.file_download import repo_folder_name

    try:
        validate_repo_id(name)
    except HFValidationError:
        return False  # not an id: looks_local says so
    cached = Path(constants.HF_HUB_CACHE) / repo_folder_name(repo_id=name, repo_type="model")
    return hub_offline() and not cached.is_dir()


def closest_entries(path: Path) -> str:
    """`` (did you mean X?)``: the entries of ``path``'s folder whose names are closest to its own, if any."""
    parent = path.parent
    names = [entry.name for entry in parent.iterdir()] if parent.is_dir() else []
    matches = difflib.get_close_matches(path.name, names, n=3)
    return f" (did you mean {' or '.join(str(parent / name) for name in matches)}?)" if matches else ""
