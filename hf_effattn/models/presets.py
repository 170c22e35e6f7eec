"""Model presets by name, timm-style: an architecture (sizes, vocabulary, image size) crossed with every
registered attention mechanism, named ``"<architecture>/<attention_type>"``.

    list_models("roberta-*/kerformer")          # fnmatch pattern
    model = create_model("roberta-base/kerformer", num_labels=2)   # randomly initialised
    model = create_model("vit-tiny-patch4-32/dba", task="masked-image-modeling")

``create_model(name, task=None, **overrides)``:

* ``name``: ``"<architecture>/<attention_type>"``; a bare architecture name means ``"sdpa"``. Unknown names
  raise with the closest known ones.
* ``task``: which head (see ``TASKS`` in :mod:`hf_effattn.models.model_classes`). Default: sequence classification
  (text) or image classification (vision) when ``num_labels`` is given, else the bare encoder (``"base"``).
* ``overrides``: any config value (``num_labels``, ``hidden_dropout_prob``, ...); ``attention_config``
  updates the preset's mechanism settings key by key. A name that is no config field raises with the closest
  ones (timm would store it unread). The local part's settings are the config's own:
  ``create_model("roberta-base/kerformer", local_window=128)``. Transformers'
  ``attn_implementation="eager"`` / ``"sdpa"`` picks that mechanism when the name does not pick another; other
  values raise. ``pretrained=True`` raises: presets have no weights.

Architectures come with the papers' own settings (see ``ARCHITECTURES``); where a mechanism's default does
not fit an architecture, the architecture adapts it in ``attention_overrides`` with the reason. Presets
describe shapes only: to start from pretrained weights, use ``from_pretrained(checkpoint,
attention_type=...)`` on the model classes.
"""

from __future__ import annotations

import dataclasses
import difflib
import fnmatch
from dataclasses import dataclass, field
from typing import Any

from . import model_classes
from ..modeling.attentions import list_attentions
from ..modeling.local_settings import split_local_settings


@dataclass(frozen=True)
class Architecture:
    """A model shape: ``family`` (``"text"`` or ``"vision"``), config values, and per-mechanism settings that
    replace defaults which do not fit it."""

    name: str
    family: str
    description: str
    config: dict[str, Any]
    attention_overrides: dict[str, dict[str, Any]] = field(default_factory=dict)


ARCHITECTURES: dict[str, Architecture] = {}


def register_architecture(architecture: Architecture) -> Architecture:
    """Add ``architecture`` to the registry (its presets are ``name/<every mechanism>``)."""
    if architecture.name in ARCHITECTURES:
        raise ValueError(f"An architecture named {architecture.name!r} is already registered.")
    ARCHITECTURES[architecture.name] = architecture
    return architecture


def text_config(
    layers, hidden, heads, ffn, max_length, vocab_size=50265, pad_token_id=1, roberta_positions=True, **extra
) -> dict:
    """Config values of a RoBERTa-style encoder whose inputs may be ``max_length`` tokens long."""
    offset = pad_token_id + 1 if roberta_positions else 0  # RoBERTa's positions start at pad_token_id + 1
    return dict(
        num_hidden_layers=layers, hidden_size=hidden, num_attention_heads=heads, intermediate_size=ffn,
        vocab_size=vocab_size, pad_token_id=pad_token_id, roberta_positions=roberta_positions,
        max_position_embeddings=max_length + offset, **extra,
    )


def vision_config(layers, hidden, heads, ffn, image_size, patch_size, **extra) -> dict:
    """Config values of a ViT-style encoder."""
    return dict(
        num_hidden_layers=layers, hidden_size=hidden, num_attention_heads=heads, intermediate_size=ffn,
        image_size=image_size, patch_size=patch_size, encoder_stride=patch_size, **extra,
    )


ROBERTA = dict(type_vocab_size=1, layer_norm_eps=1e-5, bos_token_id=0, eos_token_id=2)
# LRA inputs are symbols (ListOps tokens, bytes, grey levels) plus a few specials; [CLS] first, hence +1.
LRA = dict(vocab_size=260, pad_token_id=0, bos_token_id=1, eos_token_id=2, type_vocab_size=1)
DBA_TABLE_7 = "DBA Table 7 (the standard LRA settings, also used by the PSF-Attn paper's LRA tasks)"
# Linformer's k = 256 exceeds the 65 tokens of a 32x32 image in 4x4 patches (nothing to compress): 16, n/k about 4.
# The window alone: 128 exceeds them too; 16 reaches 8 patches either way, a row of the 8 x 8 grid.
SMALL_VIT_OVERRIDES = {"linformer": {"projected_length": 16}, "local": {"local_window": 16}}

for architecture in (
    Architecture("roberta-base", "text", "RoBERTa-base (FacebookAI/roberta-base)",
                 text_config(12, 768, 12, 3072, 512, **ROBERTA)),
    Architecture("roberta-large", "text", "RoBERTa-large (FacebookAI/roberta-large)",
                 text_config(24, 1024, 16, 4096, 512, **ROBERTA),
                 # DBA's d_in = 24 (Table 7) is not a multiple of 16 heads: the next multiple, 32.
                 attention_overrides={"dba": {"compressed_dim": 32}}),
    Architecture("bert-base", "text", "BERT-base (google-bert/bert-base-uncased), positions 0..N-1",
                 text_config(12, 768, 12, 3072, 512, vocab_size=30522, pad_token_id=0, roberta_positions=False)),
    Architecture("singularformer-text", "text",
                 "Singularformer Table 2: 6 layers, hidden 384, 6 heads, post-LN; inputs up to 1024 tokens "
                 "(its longest, MIMIC-III); FFN 4x hidden and RoBERTa's vocabulary (the paper gives neither)",
                 text_config(6, 384, 6, 1536, 1024, **ROBERTA)),
    Architecture("lra-listops", "text", f"LRA ListOps, 2000 tokens: {DBA_TABLE_7}",
                 text_config(6, 512, 8, 2048, 2001, **LRA)),
    Architecture("lra-text", "text", f"LRA byte-level text, 4000 bytes: {DBA_TABLE_7}",
                 text_config(4, 256, 4, 1024, 4001, **LRA)),
    Architecture("lra-retrieval", "text", f"LRA retrieval, 4000 bytes per document: {DBA_TABLE_7}",
                 text_config(4, 128, 4, 512, 4001, **LRA)),
    Architecture("lra-image", "text", f"LRA image, 32x32 grey levels as 1024 symbols: {DBA_TABLE_7}",
                 text_config(1, 64, 8, 128, 1025, **LRA)),
    Architecture("lra-pathfinder", "text", f"LRA Pathfinder, 32x32 pixels as 1024 symbols: {DBA_TABLE_7}",
                 text_config(1, 128, 4, 128, 1025, **LRA)),
    Architecture("vit-base-patch16-224", "vision",
                 "ViT-B/16 at 224x224 (google/vit-base-patch16-224), Kerformer's image setting",
                 vision_config(12, 768, 12, 3072, 224, 16),
                 # Linformer's k = 256 exceeds the 197 tokens (nothing to compress): 64, n/k about 3.
                 attention_overrides={"linformer": {"projected_length": 64}}),
    Architecture("vit-small-patch4-32", "vision", "ViT-S (DeiT-S sizes) on 32x32 images in 4x4 patches (CIFAR)",
                 vision_config(12, 384, 6, 1536, 32, 4), attention_overrides=SMALL_VIT_OVERRIDES),
    Architecture("vit-tiny-patch4-32", "vision", "ViT-Ti (DeiT-Ti sizes) on 32x32 images in 4x4 patches (CIFAR)",
                 vision_config(12, 192, 3, 768, 32, 4), attention_overrides=SMALL_VIT_OVERRIDES),
):
    register_architecture(architecture)


def list_models(pattern: str = "*") -> list[str]:
    """Preset names ``"<architecture>/<attention_type>"`` matching the fnmatch ``pattern``, sorted."""
    names = [f"{arch}/{attention}" for arch in ARCHITECTURES for attention in list_attentions()]
    return sorted(name for name in names if fnmatch.fnmatchcase(name, pattern))


def resolve(name: str) -> tuple[Architecture, str]:
    """The architecture and attention type of preset ``name``; unknown names suggest the closest ones."""
    arch_name, _, attention_type = name.partition("/")
    attention_type = attention_type or "sdpa"
    if arch_name not in ARCHITECTURES or attention_type not in list_attentions():
        close = difflib.get_close_matches(name, list_models() + list(ARCHITECTURES), n=5, cutoff=0.5)
        hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
        raise ValueError(f"Unknown model preset {name!r}.{hint} See hf_effattn.list_models().")
    return ARCHITECTURES[arch_name], attention_type


def create_config(name: str, **overrides):
    """The config of preset ``name`` with ``overrides`` (``attention_config`` is merged key by key; a misspelt
    name raises with the closest config fields; ``attn_implementation``, see :func:`attention_from_overrides`)."""
    architecture, attention_type = resolve(name)
    attention_type = attention_from_overrides(name, attention_type, overrides)
    config_class = model_classes.FAMILIES[architecture.family][0]
    check_config_names(config_class, overrides)
    own, local = split_local_settings(architecture.attention_overrides.get(attention_type, {}))
    attention_config = {**own, **(overrides.pop("attention_config", None) or {})}
    values = {**architecture.config, **local, **overrides}
    return config_class(attention_type=attention_type, attention_config=attention_config, **values)


# Transformers' own softmax implementations, which are also mechanisms of ours under the same names.
SOFTMAX_IMPLEMENTATIONS = ("eager", "sdpa")


def attention_from_overrides(name: str, attention_type: str, overrides: dict) -> str:
    """The preset's ``attention_type``, or the one that an ``attention_type`` override or Transformers'
    ``attn_implementation`` (both popped from ``overrides``) names; ``attn_implementation`` only ``"eager"`` or
    ``"sdpa"``. Either may name another mechanism only for a preset named without one (``"roberta-base"``); other
    ``attn_implementation`` values (``"flash_attention_2"``, ...) raise."""
    architecture = name.partition("/")[0]
    if "attention_type" in overrides:  # the name's mechanism, or one for a preset named without a mechanism
        chosen = overrides.pop("attention_type")
        if "/" in name and chosen != attention_type:
            raise ValueError(f"attention_type={chosen!r} conflicts with preset {name!r}, whose attention_type is "
                             f"{attention_type!r}: name one mechanism, e.g. create_model('{architecture}/{chosen}').")
        attention_type = chosen
    requested = overrides.pop("attn_implementation", None)
    if requested is None:
        return attention_type
    if requested not in SOFTMAX_IMPLEMENTATIONS:
        raise ValueError(
            f"attn_implementation={requested!r} is not supported: these models choose their attention by name, "
            f"e.g. create_model('{architecture}/kerformer') (one of {', '.join(list_attentions())})."
        )
    if "/" in name and requested != attention_type:
        raise ValueError(
            f"attn_implementation={requested!r} conflicts with preset {name!r}, whose attention_type is "
            f"{attention_type!r}: name one mechanism, e.g. create_model('{architecture}/{requested}')."
        )
    return requested


def check_config_names(config_class, overrides: dict) -> None:
    """Raise for an override that is no field of ``config_class`` (it would be stored and never read)."""
    known = {field.name for field in dataclasses.fields(config_class)} | {"num_labels"}
    for name in overrides:
        if name not in known:
            close = difflib.get_close_matches(name, sorted(known), n=3)
            hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
            raise ValueError(f"{config_class.__name__} has no setting {name!r}.{hint}")


def create_model(name: str, task: str | None = None, pretrained: bool = False, **overrides):
    """A randomly initialised model of preset ``name`` for ``task`` (see the module docstring). Presets have no
    weights: ``pretrained=True`` raises and says how to start from a checkpoint."""
    architecture, attention_type = resolve(name)
    classification = model_classes.FAMILIES[architecture.family][2]
    task = task or (classification if "num_labels" in overrides else "base")
    if pretrained:
        example = "FacebookAI/roberta-base" if architecture.family == "text" else "google/vit-base-patch16-224"
        raise ValueError(
            f"Preset {name!r} has no pretrained weights: create_model builds a randomly initialised model. To "
            f"start from a checkpoint, use the model class's from_pretrained, e.g. "
            f"{model_classes.model_class(architecture.family, task).__name__}.from_pretrained({example!r}, "
            f"attention_type={attention_type!r})."
        )
    return model_classes.model_class(architecture.family, task)(create_config(name, **overrides))
