"""What the source checkpoint's own card declares, for the card of a model made from it: its licence and the model it
derives from (the Hub's ``base_model``), read from the YAML metadata of a local folder's ``README.md`` or of a Hub
id's card."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from ..models.presets import list_models
from ..options.user_errors import one_line

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class License:
    """The card's licence: a Hub licence identifier (``None``: unknown, the metadata says ``other``) and whether
    it was ``given`` (``--license``) rather than taken from the source checkpoint's card."""

    name: str | None
    given: bool = False


def card_license(checkpoint: str, given: str | None = None) -> License:
    """The licence of a model made from ``checkpoint``: ``given``, else the one the checkpoint's card states."""
    return License(given, given=True) if given else License(source_license(checkpoint))


def source_license(checkpoint: str) -> str | None:
    """The ``license`` that the card of ``checkpoint`` states in its metadata: the YAML front matter of a local
    folder's ``README.md``, or the Hub card of a Hub id (through ``huggingface_hub.ModelCard``). ``None`` when it
    states none, for a preset (no source), or when the card cannot be read (logged)."""
    return one_name(source_card_field(checkpoint, "license", "licence"))


def card_base_model(checkpoint: str, given: str | None = None) -> str | None:
    """The Hub id of the model that a model made from ``checkpoint`` derives from, for the card's ``base_model``:
    ``given`` (``--base_model``), else ``checkpoint`` itself when it is a Hub id, else the ``base_model`` that the
    card of the local folder ``checkpoint`` declares (that of a folder this package wrote names its own source);
    ``None`` when none is known (a preset, a local folder whose card declares none)."""
    if given or is_hub_id(checkpoint):
        return given or checkpoint
    return one_name(source_card_field(checkpoint, "base_model", "base model"))


def source_card_field(checkpoint: str, field_name: str, what: str):
    """The value of ``field_name`` in the metadata of the card of ``checkpoint`` (see :func:`source_license`); ``None``
    when it has none, for a preset, or when the card cannot be read (logged, naming ``what`` as unknown)."""
    from huggingface_hub import ModelCard

    if checkpoint in list_models():
        return None
    folder = Path(checkpoint)
    if folder.is_dir() and not (folder / "README.md").is_file():
        return None
    try:
        card = ModelCard.load(folder / "README.md" if folder.is_dir() else checkpoint)
    except (OSError, ValueError) as error:
        logger.warning(f"Could not read the model card of {checkpoint} ({one_line(error)}): its {what} is unknown.")
        return None
    return getattr(card.data, field_name, None)


def one_name(value) -> str | None:
    """A metadata value that names one thing (a string, or a list of one), else ``None``."""
    value = value[0] if isinstance(value, list) and len(value) == 1 else value
    return value if isinstance(value, str) and value else None


def is_hub_id(name: str | None) -> bool:
    """Whether ``name`` reads as a Hub repository id rather than a local path or a preset."""
    return (bool(name) and not Path(name).exists() and name.count("/") <= 1 and not name.startswith((".", "/"))
            and name not in list_models())
