"""The exact local part of a hybrid model, declared once for the whole model (as ModernBERT declares its
``local_attention``): a sliding window or aligned blocks, the global tokens, the layers that have it, the gate's start
and how a kernelized mechanism joins it.

The settings are the model config's own fields, saved in ``config.json`` beside ``attention_type`` and
``attention_config`` (the mechanism's settings, which know nothing of a local part); ``config.local_part`` reads them
as one :class:`LocalPartSettings` (None without a local part), checked together when the config is built::

    config = EffAttnRobertaConfig(attention_type="kerformer", local_block=512, global_tokens=1)
    config.local_part.kind, config.local_part.size       # "blocks", 512

* ``local_window``: w, each token attends exactly to the real tokens at most ``w // 2`` ranks away
  (``local_window.py``).
* ``local_block``: S, each token attends exactly to the real tokens of its own aligned block of S ranks
  (``local_blocks.py``; with S the checkpoint's own length, the chunked reader); instead of ``local_window``.
* ``global_tokens``: g, the first g real tokens ([CLS]) attend to, and are attended by, every token exactly
  (Longformer's global attention).
* ``local_window_every``: k, the window only in layers 0, k, 2k, ..., the others running the mechanism alone; blocks
  are in every layer.
* ``initial_mechanism_weight``: the gate's start, each head's weight ``sigma(mechanism_logit)`` on the mechanism's part;
  None takes :data:`GATE_STARTS`, by how the mechanism joins the part and the part's kind: an even mix beside a
  window; small beside blocks, so that a converted block hybrid starts as the chunked reader it came from; smaller
  under the part's normaliser, where the mechanism's terms add up over every key outside the part. A saved model keeps
  the gates it was saved with (the logit is a saved parameter).
* ``shared_normaliser``: for a kernelized mechanism, True puts its terms under the local part's softmax normaliser
  (LoLCATs), False mixes it by the gate as every other mechanism is; None: True beside a window, False beside blocks
  (whose softmax then stays the chunked reader's).

How a mechanism joins a local part is its settings class's ``local_part_role`` (``attention_settings.py``); the
encoder layer builds the two into one module (``hybrid_attention.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .settings import DeclaredSettings, require, setting

DEFAULT_WINDOW = 128  # ModernBERT's, for 'local' without a size
# The gate's start sigma(mechanism_logit) by (join, kind).
GATE_STARTS = {("mixed", "window"): 0.5, ("mixed", "blocks"): 0.01,
               ("shared", "window"): 0.01, ("shared", "blocks"): 1e-4}
# LocalPartSettings' defaults, for a Hub folder's code without the class (tested equal).
LOCAL_PART_DEFAULTS = {"local_window": None, "local_block": None, "global_tokens": 0, "local_window_every": 1,
                       "initial_mechanism_weight": None, "shared_normaliser": None}
LOCAL_PART_SETTINGS = tuple(LOCAL_PART_DEFAULTS)
WITH_THE_PACKAGE = ("pip install hf_effattn, import it and load the folder without trust_remote_code (the package "
                    "builds any local part).")


@dataclass(frozen=True)
class LocalPartSettings(DeclaredSettings):
    """The model's exact local part: a window or blocks, global tokens, the gate's start."""

    local_window: int | None = setting(None, int, minimum=2, none_means="no window")
    local_block: int | None = setting(None, int, minimum=1, none_means="no blocks")
    global_tokens: int = setting(0, int, minimum=0)
    local_window_every: int = setting(1, int, minimum=1)
    initial_mechanism_weight: float | None = setting(None, float, above=0, below=1,
                                                     none_means="the default start beside its local part")
    shared_normaliser: bool | None = setting(None, bool, none_means="true beside a window, false beside blocks")

    @property
    def kind(self) -> str:
        """``"window"`` or ``"blocks"``."""
        return "blocks" if self.local_block is not None else "window"

    @property
    def size(self) -> int:
        """The window's width w or the blocks' size S."""
        return self.local_block if self.local_block is not None else self.local_window

    def in_layer(self, layer_idx: int) -> bool:
        """Whether layer ``layer_idx`` has the local part (``local_window_every``)."""
        return layer_idx % self.local_window_every == 0

    def shares_normaliser(self, role: str) -> bool:
        """Whether a mechanism of ``role`` (kernelized only) puts its terms under the part's normaliser."""
        if role != "kernel":
            return False
        return self.kind == "window" if self.shared_normaliser is None else self.shared_normaliser

    def gate_start(self, role: str) -> float | None:
        """The gate's start ``sigma(mechanism_logit)`` beside a mechanism of ``role``; None for the part alone."""
        if role == "alone":
            return None
        if self.initial_mechanism_weight is not None:
            return self.initial_mechanism_weight
        return GATE_STARTS["shared" if self.shares_normaliser(role) else "mixed", self.kind]

    def check(self, attention_type: str, role: str | None, max_length: int | None) -> None:
        """Raise for a part that ``attention_type`` (of ``role``) cannot take or ``max_length`` cannot hold."""
        named = f"attention_type={attention_type!r}"
        require(role is not None, self.kind_name, self.size, f"None for {named}, which is exact over every token "
                "already (for a window or blocks alone use attention_type='local')")
        require(self.local_block is None or self.local_window is None, "local_block", self.local_block,
                f"None beside local_window={self.local_window}: blocks and a window are two local parts, keep one")
        if max_length:
            require(self.size <= max_length, self.kind_name, self.size,
                    f"at most the model's maximum length {max_length} (wider is full softmax: attention_type='sdpa')")
            require(self.global_tokens <= max_length, "global_tokens", self.global_tokens,
                    f"at most the model's maximum length {max_length}")
        require(self.local_block is None or self.global_tokens <= self.local_block, "global_tokens",
                self.global_tokens,
                f"at most local_block={self.local_block} (the global tokens lie in the first block)")
        require(self.local_window_every == 1 or self.local_window is not None, "local_window_every",
                self.local_window_every, "1 without a local window (blocks are in every layer): set local_window too")
        if role == "alone":
            require(self.local_window_every == 1, "local_window_every", self.local_window_every,
                    "1 for the local part alone (a layer without it would attend to nothing)")
            require(self.initial_mechanism_weight is None, "initial_mechanism_weight", self.initial_mechanism_weight,
                    f"None for {named}, which has no mechanism beside its local part")
        require(self.shared_normaliser is None or role == "kernel", "shared_normaliser", self.shared_normaliser,
                f"None for {named}: only a kernelized mechanism can share the local part's normaliser")

    @property
    def kind_name(self) -> str:
        """``local_block`` or ``local_window``: the setting that sizes the part."""
        return "local_block" if self.kind == "blocks" else "local_window"


def local_part_settings(values: dict[str, Any], role: str | None) -> LocalPartSettings | None:
    """The local part that the config's ``values`` declare, checked, or None; alone, it defaults to a window."""
    values = {name: values.get(name, default) for name, default in LOCAL_PART_DEFAULTS.items()}
    if role == "alone" and values["local_window"] is None and values["local_block"] is None:
        values["local_window"] = DEFAULT_WINDOW
    settings = LocalPartSettings(**values)
    if settings.local_window is not None or settings.local_block is not None:
        return settings
    for name, default in LOCAL_PART_DEFAULTS.items():
        require(values[name] == default, name, values[name], f"{default!r} without a local part: set local_window or "
                "local_block")
    return None


def without_local_part(values: dict[str, Any], role: str | None) -> None:
    """What stands for :func:`local_part_settings` in the code of a Hub folder whose model has no local part
    (``remote_code.py``): None, or a ``ValueError`` for a local part's setting, which that code cannot build."""
    given = [f"{name}={values[name]!r}" for name, default in LOCAL_PART_DEFAULTS.items()
             if values.get(name, default) != default]
    if given:
        raise ValueError(f"This model's code has no local part, so {', '.join(given)} cannot be set: "
                         f"{WITH_THE_PACKAGE}")
    return None


def current_spelling(values: dict) -> dict:
    """``values`` (a ``config.json`` dict, or arguments: ``attention_config`` and the local part's settings) with the
    local part's settings moved out of ``attention_config`` to their own keys, where folders saved before 0.3 keep
    them; one given both ways with two values raises."""
    own, legacy = split_local_settings(values.get("attention_config"))
    if own == values.get("attention_config"):
        return values
    given = {name: values[name] for name in LOCAL_PART_SETTINGS if name in values}
    return {**values, "attention_config": own, **merge_local_settings(given, legacy)}


def as_written(values: dict) -> dict:
    """:func:`current_spelling` in a Hub folder's code: ``values`` as they are (its config is in that spelling)."""
    return values


def split_local_settings(attention_config: dict | None) -> tuple[dict | None, dict]:
    """A mechanism's ``attention_config`` without the local part's settings, and those settings that differ from
    their defaults (folders saved before 0.3 keep the local part among the mechanism's settings)."""
    if attention_config is None or not isinstance(attention_config, dict):
        return attention_config, {}
    own = {name: value for name, value in attention_config.items() if name not in LOCAL_PART_DEFAULTS}
    local = {name: value for name, value in attention_config.items()
             if name in LOCAL_PART_DEFAULTS and not same_value(value, LOCAL_PART_DEFAULTS[name])}
    return own, local


def merge_local_settings(given: dict, other: dict, given_as: str = "{name}={value!r}",
                         where: str = "attention_config") -> dict:
    """``given`` (name -> value; ``None`` or the default for not given) with ``other``'s values merged in: one answer
    per setting, so a setting given in both with two values raises a ``ValueError`` that names both, ``given_as``
    spelling the first (e.g. ``"--{name} {value}"``) and ``where`` the second. A value that is not a finite number is
    merged as any other: the setting's own check refuses it, naming it."""
    merged = dict(given)
    for name, value in other.items():
        mine = merged.get(name)
        if mine is not None and not same_value(mine, LOCAL_PART_DEFAULTS.get(name)) and not same_value(mine, value):
            raise ValueError(f"{given_as.format(name=name, value=mine)} contradicts {name}={value!r} in {where}: give "
                             "it once.")
        merged[name] = value
    return merged


def same_value(first, second) -> bool:
    """Whether two values of a setting are one answer: equal, or both NaN (which is unequal to itself)."""
    return first == second or (first != first and second != second)
