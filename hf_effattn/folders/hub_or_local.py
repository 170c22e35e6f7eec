"""A name that a command reads, a Hub id or a local file or folder: whether the Hub is offline
(:func:`hub_offline`), and a local folder that does not exist refused with the closest entries of its parent
(:func:`check_found`), rather than sent to the Hub, whose complaint would be about the id's form or a failed
connection; offline, a Hub id the cache lacks refused with the download that fills it; online, one the cache lacks
refused at once when the Hub cannot be reached (one attempt, where ``huggingface_hub`` would retry for half a minute);
a file refused for the folder that holds it. ``hf-effattn convert`` and the fine-tuning scripts check their inputs
with it before anything loads."""

from __future__ import annotations

import difflib
import inspect
import os
from pathlib import Path

from huggingface_hub.utils import HFValidationError, validate_repo_id

from ..options.user_errors import one_line

TRUE_VALUES = {"1", "on", "yes", "true"}
PROBE_TIMEOUT = 4  # seconds: a Hub that does not answer one request in this long is taken as unreachable


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
    ``ConnectionError`` for a model id that the cache lacks when the Hub cannot be reached (:func:`check_reachable`).
    Raise ``NotADirectoryError`` for a file (``model/config.json``), which Transformers would try to read as a config
    or as weights. ``what``: what the name is (``Checkpoint``, ``Tokenizer``, ...)."""
    path = Path(name)
    if path.is_file():
        raise NotADirectoryError(f"{what} {name} is a file, not a folder: give the folder that holds it (did you mean "
                                 f"{path.parent}?), or a Hub id.")
    if path.exists():
        return
    uncached = hub_cache and missing_from_cache(str(name))
    if uncached and hub_offline():
        raise FileNotFoundError(f"{what} {name} is neither a local folder{closest_entries(path)} nor in the Hub cache, "
                                f"and HF_HUB_OFFLINE is set: download it while online first (hf download {name}), or "
                                "give an existing folder.")
    if looks_local(path):
        raise FileNotFoundError(f"{what} folder {name} not found{closest_entries(path)}: give an existing folder, or a "
                                "Hub id such as FacebookAI/roberta-base.")
    if uncached:
        check_reachable(str(name), what)


def check_reachable(name: str, what: str) -> None:
    """Raise ``ConnectionError`` when the Hub does not answer one request for ``name``'s ``config.json`` within
    :data:`PROBE_TIMEOUT` seconds with the errors ``huggingface_hub`` would retry (no network, a timeout), which it
    retries for half a minute before Transformers gives up; any answer (a missing or gated repository too) passes,
    for Transformers to read or report."""
    from huggingface_hub import get_hf_file_metadata, hf_hub_url
    from huggingface_hub.utils import _http

    network_errors = getattr(_http, "_DEFAULT_RETRY_ON_EXCEPTIONS", (ConnectionError, TimeoutError))
    once = {"retry_on_errors": False} if "retry_on_errors" in inspect.signature(get_hf_file_metadata).parameters else {}
    try:
        get_hf_file_metadata(hf_hub_url(name, "config.json"), timeout=PROBE_TIMEOUT, **once)
    except network_errors as error:
        raise ConnectionError(f"{what} {name} is not in the Hub cache and the Hub cannot be reached "
                              f"({one_line(error)}): connect to the network, or give a local folder (HF_HUB_OFFLINE=1 "
                              "reads the cache without trying the network).") from None
    except Exception:  # noqa: BLE001 - an answer: Transformers reads it or reports it as it does
        return


def check_hub_id(name: str | None) -> None:
    """Raise ``ValueError`` unless ``name`` (when given) has the form of a Hub model id, ``user/name`` or ``name``."""
    if name is None:
        return
    try:
        validate_repo_id(name)
    except HFValidationError:
        raise ValueError(f"{name!r} is not a Hub id: give one such as sentence-transformers/all-MiniLM-L6-v2.") \
            from None


def looks_local(path: Path) -> bool:
    """Whether ``path`` names a local file or folder rather than a Hub id: it cannot be a Hub id, or its first part
    is a local folder."""
    try:
        validate_repo_id(str(path))
    except HFValidationError:
        return True
    return len(path.parts) > 1 and Path(path.parts[0]).is_dir()


def missing_from_cache(name: str) -> bool:
    """Whether ``name`` is the id of a model repository that the Hub cache holds nothing of."""
    from huggingface_hub import constants
    from huggingface_hub.file_download import repo_folder_name

    try:
        validate_repo_id(name)
    except HFValidationError:
        return False  # not an id: looks_local says so
    return not (Path(constants.HF_HUB_CACHE) / repo_folder_name(repo_id=name, repo_type="model")).is_dir()


def closest_entries(path: Path) -> str:
    """`` (did you mean X?)``: the entries of ``path``'s folder whose names are closest to its own, if any."""
    parent = path.parent
    names = [entry.name for entry in parent.iterdir()] if parent.is_dir() else []
    matches = difflib.get_close_matches(path.name, names, n=3)
    return f" (did you mean {' or '.join(str(parent / name) for name in matches)}?)" if matches else ""
