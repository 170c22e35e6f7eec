"""A sentence-transformers checkpoint stays one: its layout (``modules.json``, the settings files, the folders of the
modules after the transformer: pooling, normalisation, dense layers) is copied into the folder that
``hf-effattn convert``, ``run_mlm.py``, the fine-tuning scripts and the Trainer script write
(:func:`copy_sentence_transformers_modules`), with ``max_seq_length`` following a model whose positions were
extended, so that ``SentenceTransformer(folder, trust_remote_code=True)`` runs the source's pipeline on the new model.
A folder that cannot carry them (a LoRA adapter's) is announced in one line before training
(:func:`warn_modules_not_carried`). :func:`sentence_embedding` reads a folder's pipeline back, for its model card.

Only JSON settings are read and files copied: a module's weights (a dense layer's) are never loaded here.
"""

from __future__ import annotations

import json
import logging
import shutil
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)

MODULES_FILE = "modules.json"
SETTINGS_FILE = "sentence_bert_config.json"  # the transformer module's settings, max_seq_length among them
SETTINGS_FILES = (MODULES_FILE, SETTINGS_FILE, "config_sentence_transformers.json")
POOLING_MODES = ("mean", "cls", "max")  # the poolings that Transformers alone reproduces in the card's snippet
LEGACY_POOLING_FLAGS = {"pooling_mode_mean_tokens": "mean", "pooling_mode_cls_token": "cls",
                        "pooling_mode_max_tokens": "max", "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
                        "pooling_mode_weightedmean_tokens": "weightedmean", "pooling_mode_lasttoken": "lasttoken"}


def module_list(checkpoint: str) -> list[dict] | None:
    """The modules of ``checkpoint`` (a folder or a Hub id), as its ``modules.json`` lists them; ``None`` for a
    checkpoint that is not a sentence-transformers model."""
    from transformers.utils import cached_file

    path = cached_file(checkpoint, MODULES_FILE, _raise_exceptions_for_missing_entries=False)
    return None if path is None else json.loads(Path(path).read_text())


def copy_sentence_transformers_modules(checkpoint: str, output_dir, max_seq_length: int | None = None) -> None:
    """Copy the module list, the settings files and the module folders (those after the transformer, which is the
    model in the folder's root) of a sentence-transformers ``checkpoint`` into ``output_dir``; nothing for another
    checkpoint. ``max_seq_length``: the transformer module's new maximum length, for a model extended to more
    positions; written where the settings state one (sentence-transformers before v6: newer ones read the
    tokenizer's ``model_max_length``, which the commands size as they extend the model)."""
    modules = module_list(checkpoint)
    if modules is None:
        return
    folders = [module["path"] for module in modules if module["path"]]
    root = local_copy(checkpoint, [*SETTINGS_FILES, *(f"{folder}/*" for folder in folders)])
    for name in SETTINGS_FILES:
        if (root / name).is_file():
            shutil.copyfile(root / name, Path(output_dir) / name)
    settings = Path(output_dir) / SETTINGS_FILE
    values = json.loads(settings.read_text()) if settings.is_file() else {}
    if max_seq_length is not None and "max_seq_length" in values:  # else the tokenizer's length is the module's
        settings.write_text(json.dumps({**values, "max_seq_length": max_seq_length}, indent=2))
    folders = [folder for folder in folders if (root / folder).is_dir()]  # Normalize, for one, saves no files
    for folder in folders:
        shutil.copytree(root / folder, Path(output_dir) / folder, dirs_exist_ok=True)
    logger.info(f"Copied the sentence-transformers modules of {checkpoint} ({', '.join(folders) or 'none'}).")


def local_copy(checkpoint: str, patterns: list[str]) -> Path:
    """The folder of ``checkpoint``, or, for a Hub id, the snapshot of its files that match ``patterns``."""
    if Path(checkpoint).is_dir():
        return Path(checkpoint)
    from huggingface_hub import snapshot_download

    return Path(snapshot_download(checkpoint, allow_patterns=patterns))


def warn_modules_not_carried(checkpoint: str, why: str) -> None:
    """Say in one line, before training, that the sentence-transformers modules of ``checkpoint`` (if it has any)
    will not be in the output folder, and ``why``."""
    modules = module_list(checkpoint)
    if modules is not None:
        names = ", ".join(module_name(module) for module in modules)
        logger.warning(f"{checkpoint} is a sentence-transformers model ({names}), but its modules are not carried "
                       f"into the output folder: {why}")


def module_name(module: dict) -> str:
    """A module's class name, from its ``type`` (``sentence_transformers.models.Pooling`` -> ``Pooling``)."""
    return module["type"].rsplit(".", 1)[-1]


@dataclass(frozen=True)
class SentenceEmbedding:
    """How a sentence-transformers folder turns its model's last hidden state into a sentence embedding: the modules
    in order, the pooling where Transformers alone reproduces it (one of :data:`POOLING_MODES`, else ``None``), the
    final normalisation, and the transformer module's ``max_seq_length`` (``None``: the tokenizer's)."""

    modules: tuple[str, ...]
    pooling: str | None
    normalize: bool
    max_seq_length: int | None


def sentence_embedding(folder) -> SentenceEmbedding | None:
    """The sentence-embedding pipeline of the sentence-transformers ``folder``; ``None`` when it is not one."""
    folder = Path(folder)
    if not (folder / MODULES_FILE).is_file():
        return None
    modules = json.loads((folder / MODULES_FILE).read_text())
    names = tuple(module_name(module) for module in modules)
    settings_file = folder / SETTINGS_FILE
    settings = json.loads(settings_file.read_text()) if settings_file.is_file() else {}
    reproducible = names in (("Transformer", "Pooling"), ("Transformer", "Pooling", "Normalize"))
    pooling = pooling_mode(folder / modules[1]["path"]) if reproducible and not settings.get("do_lower_case") else None
    return SentenceEmbedding(modules=names, pooling=pooling, normalize=names[-1] == "Normalize",
                             max_seq_length=settings.get("max_seq_length"))


def pooling_mode(pooling_folder: Path) -> str | None:
    """The one pooling mode of a Pooling module's ``config.json`` (sentence-transformers' ``pooling_mode`` or the
    older ``pooling_mode_<mode>[_token(s)]`` flags) when it is one of :data:`POOLING_MODES`, else ``None``."""
    config_file = pooling_folder / "config.json"
    if not config_file.is_file():
        return None
    config = json.loads(config_file.read_text())
    modes = config.get("pooling_mode") or [mode for flag, mode in LEGACY_POOLING_FLAGS.items() if config.get(flag)]
    modes = [modes] if isinstance(modes, str) else list(modes)
    return modes[0] if len(modes) == 1 and modes[0] in POOLING_MODES else None
