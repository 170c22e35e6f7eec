"""Configurations of the efficient-attention encoders: RoBERTa's and ViT's, plus the attention mechanism.

Both add two fields, saved in ``config.json``:

* ``attention_type``: a registered mechanism (``list_attentions()``), default ``"sdpa"`` (exact softmax
  attention, the arithmetic of the Transformers classes).
* ``attention_config``: a dict of that mechanism's settings. Missing keys take the paper defaults; the
  stored dict is always complete, so a saved model does not depend on later changes of defaults.

Both are validated when the config is built, from keyword arguments or from a ``config.json``: an unknown type
lists the known ones, each mechanism setting is checked against its declared type and range
(``attention_base``), and one that does not fit the model's shape (width, heads, maximum length) names the
setting and what is allowed. So are the config values the models rely on (``CONFIG_SPECS``, plus each family's
own): sizes are positive integers, the heads divide the width, dropout probabilities lie in [0, 1], flags are
real bools, and the maximum length below leaves room for at least one token.

The mechanisms' maximum length (``attention_max_length``) is the longest input the embeddings can
position: for RoBERTa ``max_position_embeddings - pad_token_id - 1`` (positions start at
``pad_token_id + 1``), for BERT-style positions (``roberta_positions=False``) ``max_position_embeddings``,
for ViT the number of patches plus the [CLS] token.

A model loaded with a larger input size than its checkpoint's (``from_pretrained(..., max_length=N)`` for text,
``image_size=S`` for ViT: the config's ``size_argument``) is loaded at the checkpoint's size and then extended
(``position_extension``); :meth:`EffAttnConfigMixin.resized` and :meth:`~EffAttnConfigMixin.check_extends` give
the configs of both sizes and refuse a smaller one.
"""

from __future__ import annotations

import copy
from typing import Any, ClassVar

from .supported_versions import SUPPORTED_TRANSFORMERS  # noqa: F401, I001 - first: explains an old Transformers
from transformers import RobertaConfig, ViTConfig

from .attention_settings import check_heads
from .attentions import build_settings
from .settings import Spec, checked

# The settings of the exact local part (a window or aligned blocks) and its gate, which every mechanism has
# (``attention_base.AttentionSettings``), also accepted as keyword arguments.
WINDOW_SETTINGS = ("local_window", "global_tokens", "local_window_every", "local_block", "initial_mechanism_weight")


def merge_window_settings(attention_config: dict | None, window: dict, given_as: str = "{name}={value!r}",
                          where: str = "attention_config") -> dict | None:
    """``attention_config`` with the window settings ``window`` (name -> value, ``None`` for not given) merged in
    (``attention_config`` itself when none is given). One answer per setting: a setting given in both with two
    values raises a ``ValueError`` that names both, ``given_as`` spelling the keyword (e.g. ``"--{name} {value}"``)
    and ``where`` the settings. A value that is not a finite number is merged as any other: the setting's own check
    refuses it, naming it."""
    if all(value is None for value in window.values()):
        return attention_config
    settings = dict(attention_config or {})
    for name, value in window.items():
        if value is None:
            continue
        if name in settings and not same_value(settings[name], value):
            raise ValueError(f"{given_as.format(name=name, value=value)} contradicts {name}={settings[name]!r} in "
                             f"{where}: give it once.")
        settings[name] = value
    return settings


def same_value(first, second) -> bool:
    """Whether two values of a setting are one answer: equal, or both NaN (which is unequal to itself)."""
    return first == second or (first != first and second != second)


# The config values that the models of both families rely on, beyond hidden_size and num_attention_heads.
CONFIG_SPECS = {
    "num_hidden_layers": Spec(int, minimum=0),
    "intermediate_size": Spec(int, minimum=1),
    "hidden_dropout_prob": Spec(float, minimum=0, maximum=1),
    "attention_probs_dropout_prob": Spec(float, minimum=0, maximum=1),
    "layer_norm_eps": Spec(float, above=0),
    "initializer_range": Spec(float, minimum=0),
}


def saved_attention(config_dict: dict) -> tuple[str, dict | None]:
    """The mechanism and settings of a saved ``config.json`` dict (complete as written: a saved model never depends
    on later changes of defaults)."""
    return config_dict.get("attention_type", "sdpa"), config_dict.get("attention_config")


class EffAttnConfigMixin:
    """Validation and normalisation of the config values and of ``attention_type`` / ``attention_config``,
    shared by both configs; ``family_specs`` are the values a family adds to ``CONFIG_SPECS``."""

    family_specs: ClassVar[dict[str, Spec]] = {}
    size_argument: ClassVar[str]  # the argument of from_pretrained and convert that sets the input size
    size_fields: ClassVar[tuple[str, ...]]  # the config values it sets
    smaller_inputs_fix: ClassVar[str]  # how to use inputs smaller than a checkpoint's, given its ``{size}``

    @property
    def attention_max_length(self) -> int:
        """The longest input (in tokens) that the model can embed."""
        raise NotImplementedError

    @property
    def input_size(self) -> Any:
        """The input size the model is built for, as ``size_argument`` gives it."""
        raise NotImplementedError

    def size_values(self, size) -> dict[str, Any]:
        """The values of ``size_fields`` for input size ``size`` (a value of ``size_argument``), checked."""
        raise NotImplementedError

    def resized(self, values: dict[str, Any]):
        """A copy of this config with ``values`` (of ``size_fields``), checked."""
        config = copy.deepcopy(self)
        for name, value in values.items():
            setattr(config, name, value)
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
        """Transformers' set-up, then the attention's: a window setting given as a keyword (``local_window=128``)
        goes into ``attention_config`` (:func:`merge_window_settings`: given there too with another value, it
        raises), never into a config key of its own; then :meth:`setup_attention`."""
        window = {name: kwargs.pop(name) for name in WINDOW_SETTINGS if name in kwargs}
        self.attention_config = merge_window_settings(self.attention_config, window)
        super().__post_init__(**kwargs)
        self.setup_attention()

    @classmethod
    def from_dict(cls, config_dict: dict, **kwargs):
        """As :meth:`transformers.PreTrainedConfig.from_dict`, where an ``attention_type``, an ``attention_config``
        or a local part's setting (:data:`WINDOW_SETTINGS`: ``local_window``, ``local_block``, ...) among ``kwargs`` (as
        ``AutoConfig`` / ``AutoModel*.from_pretrained(folder, attention_type=..., local_window=...)`` pass them;
        ``None`` keeps the saved value) takes the saved one's place before validation. Settings update the saved
        ones key by key (a window setting given both in ``attention_config`` and as a keyword, with two values,
        raises); another ``attention_type`` starts from its own defaults, never from the saved mechanism's
        settings."""
        config_dict = dict(config_dict)
        attention_type, attention_config = kwargs.pop("attention_type", None), kwargs.pop("attention_config", None)
        given = merge_window_settings(attention_config, {name: kwargs.pop(name, None) for name in WINDOW_SETTINGS})
        if attention_type is not None and attention_type != config_dict.get("attention_type", "sdpa"):
            config_dict.update(attention_type=attention_type, attention_config=None)
        if given is not None:
            config_dict["attention_config"] = {**(config_dict.get("attention_config") or {}), **given}
        return super().from_dict(config_dict, **kwargs)

    def check_family(self) -> None:
        """Raise for values of the family's own that do not fit together (after their types are checked)."""

    def setup_attention(self) -> None:
        """Check the config values, the model shape and the mechanism settings; store the complete settings."""
        check_heads(self.hidden_size, self.num_attention_heads)
        for name, spec in {**CONFIG_SPECS, **self.family_specs}.items():
            checked(name, getattr(self, name), spec, where="config value")
        self.check_family()
        settings = build_settings(self.attention_type, self.attention_config)
        settings.check(self.hidden_size, self.num_attention_heads, self.attention_max_length)
        self.attention_config = settings.to_dict()


class EffAttnRobertaConfig(EffAttnConfigMixin, RobertaConfig):
    r"""A RoBERTa configuration whose self-attention is ``attention_type``; the other arguments are
    :class:`~transformers.RobertaConfig`'s.

    Args:
        attention_type (`str`, defaults to `"sdpa"`): a registered attention mechanism.
        attention_config (`dict`, *optional*): that mechanism's settings (paper defaults for missing keys).
        roberta_positions (`bool`, defaults to `True`): position ids as RoBERTa computes them (real tokens
            numbered from ``pad_token_id + 1``, pads at ``pad_token_id``); `False` gives BERT's ``0 .. N-1``,
            set when converting a BERT checkpoint.
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
        """With RoBERTa positions, ``pad_token_id`` must be a token id that leaves room for one position."""
        if not self.roberta_positions:
            return
        checked("pad_token_id", self.pad_token_id, Spec(int, minimum=0), where="config value",
                fix=", since RoBERTa positions count from it (or set roberta_positions=False for BERT's 0 .. N-1)")
        if self.attention_max_length < 1:
            raise ValueError(
                f"max_position_embeddings={self.max_position_embeddings} leaves no position for a token: RoBERTa "
                f"numbers tokens from pad_token_id + 1 = {self.pad_token_id + 1}, so it must be at least "
                f"{self.pad_token_id + 2} (or set roberta_positions=False for BERT's 0 .. N-1)."
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
    r"""A ViT configuration whose self-attention is ``attention_type``; the other arguments are
    :class:`~transformers.ViTConfig`'s.

    Args:
        attention_type (`str`, defaults to `"sdpa"`): a registered attention mechanism.
        attention_config (`dict`, *optional*): that mechanism's settings (paper defaults for missing keys).
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
