"""Configurations of the efficient-attention encoders, RoBERTa's and ViT's.

Both add ``attention_type`` (a registered mechanism; default ``"sdpa"``), ``attention_config`` (its settings, stored
complete) and the exact local part (``local_window`` or ``local_block``, ``global_tokens``, ...: ``config.local_part``),
all checked when the config is built.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, ClassVar

from .supported_versions import SUPPORTED_TRANSFORMERS  # noqa: F401, I001 - first: explains an old Transformers
from transformers import RobertaConfig, ViTConfig

from .attention_settings import check_heads
from .attentions import get_settings_class, resolved_attention
from .local_settings import (
    LOCAL_PART_DEFAULTS, LOCAL_PART_SETTINGS, LocalPartSettings, current_spelling, local_part_settings, same_value,
)
from .settings import Spec, checked

CONFIG_SPECS = {
    "num_hidden_layers": Spec(int, minimum=0),
    "intermediate_size": Spec(int, minimum=1),
    "hidden_dropout_prob": Spec(float, minimum=0, maximum=1),
    "attention_probs_dropout_prob": Spec(float, minimum=0, maximum=1),
    "layer_norm_eps": Spec(float, above=0),
    "initializer_range": Spec(float, minimum=0),
}


def saved_attention(config_dict: dict) -> tuple[str, dict | None, dict]:
    """The mechanism, its settings and the local part (the settings that differ from their defaults) of a saved
    ``config.json`` dict, as written."""
    config_dict = current_spelling(config_dict)
    local = {name: config_dict[name] for name in LOCAL_PART_SETTINGS
             if name in config_dict and not same_value(config_dict[name], LOCAL_PART_DEFAULTS[name])}
    return config_dict.get("attention_type", "sdpa"), config_dict.get("attention_config"), local


@dataclass(repr=False, eq=False)
class EffAttnConfigMixin:
    """Checks of both configs; ``family_specs`` extends ``CONFIG_SPECS``."""

    local_window: int | None = None
    local_block: int | None = None
    global_tokens: int = 0
    local_window_every: int = 1
    initial_mechanism_weight: float | None = None
    shared_normaliser: bool | None = None

    family_specs: ClassVar[dict[str, Spec]] = {}
    size_argument: ClassVar[str]  # the argument of from_pretrained and convert that sets the input size
    size_fields: ClassVar[tuple[str, ...]]  # the config values it sets
    smaller_inputs_fix: ClassVar[str]  # how to use inputs smaller than a checkpoint's, given its ``{size}``

    @property
    def attention_max_length(self) -> int:
        """Longest input the model can embed, in tokens."""
        raise NotImplementedError

    @property
    def input_size(self) -> Any:
        """The input size the model is built for, as ``size_argument`` gives it."""
        raise NotImplementedError

    def size_values(self, size) -> dict[str, Any]:
        """The values of ``size_fields`` for input size ``size`` (a value of ``size_argument``), checked."""
        raise NotImplementedError

    @property
    def local_part(self) -> LocalPartSettings | None:
        """The model's exact local part, or None."""
        values = {name: getattr(self, name) for name in LOCAL_PART_SETTINGS}
        return local_part_settings(values, get_settings_class(self.attention_type).local_part_role)

    def resized(self, values: dict[str, Any], check: bool = True):
        """A copy of this config with ``values`` (of ``size_fields``), checked; ``check`` False leaves the checks
        that depend on the size to the config it was resized from (the checkpoint's size, which a model extended to
        this one loads its weights at)."""
        config = copy.deepcopy(self)
        for name, value in values.items():
            setattr(config, name, value)
        if check:
            config.setup_attention()
        return config

    def check_extends(self, saved, path) -> None:
        """Raise unless this config takes inputs at least as large as ``saved``, the config of checkpoint ``path``
        (positions are extended, never cut)."""
        if all(new >= old for new, old in zip(pair(self.input_size), pair(saved.input_size))):
            return
        raise ValueError(
            f"{self.size_argument}={self.input_size} is below the {saved.input_size} of {path}: positions are "
            f"extended, never cut. Load it without {self.size_argument} (it takes inputs up to "
            f"{saved.input_size}); {self.smaller_inputs_fix.format(size=self.input_size)}."
        )

    def __post_init__(self, **kwargs):
        super().__post_init__(**kwargs)
        self.setup_attention()

    @classmethod
    def from_dict(cls, config_dict: dict, **kwargs):
        """As Transformers', but non-None attention and local part ``kwargs`` override saved values, dicts by key."""
        config_dict = current_spelling(config_dict)
        given = current_spelling({"attention_config": kwargs.pop("attention_config", None),
                                  **{name: kwargs.pop(name, None) for name in LOCAL_PART_SETTINGS}})
        given_type = kwargs.pop("attention_type", None)
        if given_type is not None and given_type != config_dict.get("attention_type", "sdpa"):
            config_dict.update(attention_type=given_type, attention_config=None, **LOCAL_PART_DEFAULTS)
        if given["attention_config"] is not None:
            saved = config_dict.get("attention_config") or {}
            config_dict["attention_config"] = {**saved, **given["attention_config"]}
        config_dict.update({name: given[name] for name in LOCAL_PART_SETTINGS if given.get(name) is not None})
        return super().from_dict(config_dict, **kwargs)

    def check_family(self) -> None:
        """Raise where the family's values clash."""

    def setup_attention(self) -> None:
        """Check and complete the values, settings and local part."""
        check_heads(self.hidden_size, self.num_attention_heads)
        for name, spec in {**CONFIG_SPECS, **self.family_specs}.items():
            checked(name, getattr(self, name), spec, where="config value")
        self.check_family()
        values = current_spelling({"attention_config": self.attention_config,
                                   **{name: getattr(self, name) for name in LOCAL_PART_SETTINGS}})
        settings, local = resolved_attention(self.attention_type, values["attention_config"],
                                             {name: values[name] for name in LOCAL_PART_SETTINGS},
                                             self.attention_max_length)
        settings.check(self.hidden_size, self.num_attention_heads, self.attention_max_length)
        self.attention_config = settings.to_dict()
        for name, value in (local.to_dict() if local is not None else LOCAL_PART_DEFAULTS).items():
            setattr(self, name, value)


class EffAttnRobertaConfig(EffAttnConfigMixin, RobertaConfig):
    """A :class:`~transformers.RobertaConfig` with ``attention_type`` self-attention.

    Args:
        attention_type (`str`, defaults to `"sdpa"`): a registered mechanism.
        attention_config (`dict`, *optional*): its settings, paper defaults where missing.
        roberta_positions (`bool`, defaults to `True`): RoBERTa's positions, else BERT's ``0 .. N-1``.
    """

    model_type = "effattn_roberta"

    attention_type: str = "sdpa"
    attention_config: dict | None = None
    roberta_positions: bool = True

    family_specs = {
        "vocab_size": Spec(int, minimum=1),
        "max_position_embeddings": Spec(int, minimum=1),
        "type_vocab_size": Spec(int, minimum=1),
        "roberta_positions": Spec(bool),
    }
    size_argument = "max_length"
    size_fields = ("max_position_embeddings",)
    smaller_inputs_fix = "to use fewer tokens, truncate: tokenizer(..., truncation=True, max_length={size})"

    def check_family(self) -> None:
        """RoBERTa positions need a row after ``pad_token_id``."""
        if not self.roberta_positions:
            return
        checked("pad_token_id", self.pad_token_id, Spec(int, minimum=0), where="config value",
                fix=", since RoBERTa positions count from it (or set roberta_positions=False)")
        if self.attention_max_length < 1:
            raise ValueError(
                f"max_position_embeddings={self.max_position_embeddings} leaves no position for a token: RoBERTa's "
                f"start at pad_token_id + 1 = {self.pad_token_id + 1}, so it must be at least "
                f"{self.pad_token_id + 2} (or set roberta_positions=False)."
            )

    @property
    def attention_max_length(self) -> int:
        if self.roberta_positions:
            return self.max_position_embeddings - self.pad_token_id - 1
        return self.max_position_embeddings

    @property
    def input_size(self) -> int:
        return self.attention_max_length

    def size_values(self, size) -> dict[str, Any]:
        """``max_position_embeddings`` for inputs of up to ``size`` tokens (plus RoBERTa's reserved rows)."""
        checked(self.size_argument, size, Spec(int, minimum=1), where="argument")
        return {"max_position_embeddings": size + self.max_position_embeddings - self.attention_max_length}


class EffAttnViTConfig(EffAttnConfigMixin, ViTConfig):
    """A :class:`~transformers.ViTConfig` with ``attention_type`` self-attention.

    Args:
        attention_type (`str`, defaults to `"sdpa"`): a registered mechanism.
        attention_config (`dict`, *optional*): its settings, paper defaults where missing.
    """

    model_type = "effattn_vit"

    attention_type: str = "sdpa"
    attention_config: dict | None = None

    family_specs = {
        "num_channels": Spec(int, minimum=1),
        "encoder_stride": Spec(int, minimum=1),
        "qkv_bias": Spec(bool),
    }
    size_argument = "image_size"
    size_fields = ("image_size",)
    smaller_inputs_fix = "to run it on smaller images, pass interpolate_pos_encoding=True to the model"

    def check_family(self) -> None:
        """``image_size`` and ``patch_size`` (each an integer or a (height, width) pair) give at least one patch."""
        size = Spec(int, minimum=1)
        for name in ("image_size", "patch_size"):
            for value in pair(getattr(self, name)):
                checked(name, value, size, where="config value")
        if any(patch > image for image, patch in zip(pair(self.image_size), pair(self.patch_size))):
            raise ValueError(
                f"patch_size={self.patch_size} is larger than image_size={self.image_size}: the image would have "
                "no patch; choose a patch size at most the image size."
            )

    @property
    def attention_max_length(self) -> int:
        height, width = pair(self.image_size)
        patch_height, patch_width = pair(self.patch_size)
        return (height // patch_height) * (width // patch_width) + 1

    @property
    def input_size(self) -> tuple[int, int]:
        return pair(self.image_size)

    def size_values(self, size) -> dict[str, Any]:
        """``image_size`` for images of ``size`` pixels (an integer, or a ``(height, width)`` pair)."""
        for value in pair(size):
            checked(self.size_argument, value, Spec(int, minimum=1), where="argument")
        return {"image_size": size}


def pair(value) -> tuple[int, int]:
    """``value`` as a ``(height, width)`` pair."""
    return tuple(value) if isinstance(value, (list, tuple)) else (value, value)
