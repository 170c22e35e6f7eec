"""The registry of attention mechanisms: each registers its class under a name, and models build it by that name.

    @register_attention("efficient")
    class EfficientLinearAttention(EfficientAttention): ...

    list_attentions()                                   # names, in registration order
    build_attention("kerformer", 768, 12, {"se_mode": "channel"}, max_length=512)
    describe_attention("dba")                           # paper, equations, defaults and capabilities

Import mechanisms through ``attentions.py``, which imports every built-in one, so that the registry is complete.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping
from typing import Any

from .attention_base import EfficientAttention
from .attention_settings import AttentionSettings

_REGISTRY: dict[str, type[EfficientAttention]] = {}


def register_attention(name: str):
    """Class decorator adding a mechanism to the registry under ``name``."""

    def decorate(cls: type[EfficientAttention]) -> type[EfficientAttention]:
        if name in _REGISTRY and _REGISTRY[name] is not cls:
            raise ValueError(f"An attention named {name!r} is already registered ({_REGISTRY[name].__name__}).")
        cls.name = name
        _REGISTRY[name] = cls
        return cls

    return decorate


def list_attentions() -> list[str]:
    """Names of the registered mechanisms, in registration order."""
    return list(_REGISTRY)


def get_attention_class(name: str) -> type[EfficientAttention]:
    """The mechanism class registered as ``name``; an unknown name lists the known ones."""
    if not isinstance(name, str):
        raise TypeError(f"Invalid attention_type={name!r}: it must be a string, one of {', '.join(_REGISTRY)}.")
    if name not in _REGISTRY:
        close = difflib.get_close_matches(name, _REGISTRY, n=3)
        hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
        raise ValueError(f"Unknown attention_type {name!r}. Known: {', '.join(_REGISTRY)}.{hint}")
    return _REGISTRY[name]


def build_settings(name: str, settings: dict[str, Any] | AttentionSettings | None = None) -> AttentionSettings:
    """The settings dataclass of mechanism ``name`` from a dict (missing keys take the paper defaults)."""
    settings_class = get_attention_class(name).settings_class
    if isinstance(settings, settings_class):
        return settings
    if settings is not None and not isinstance(settings, Mapping):
        raise TypeError(
            f"Invalid attention_config={settings!r}: it must be a dict of {name!r} settings, or None for the "
            "defaults."
        )
    settings = dict(settings or {})
    known = [f.name for f in dataclasses.fields(settings_class)]
    unknown = sorted(set(settings) - set(known))
    if unknown:
        window = [f.name for f in dataclasses.fields(AttentionSettings)]
        own = [setting for setting in known if setting not in window]
        raise ValueError(
            f"Unknown setting(s) {', '.join(unknown)} for attention {name!r}. "
            f"Valid settings: {', '.join(own) or 'none of its own'}; and the local part's, "
            f"{', '.join(window)}."
        )
    return settings_class(**settings)


def build_attention(
    name: str,
    hidden_size: int,
    num_heads: int,
    settings: dict[str, Any] | AttentionSettings | None = None,
    **kwargs: Any,
) -> EfficientAttention:
    """Build mechanism ``name``; ``kwargs``: ``max_length``, ``layer_idx``, ``attention_dropout``, ``qkv_bias``."""
    return get_attention_class(name)(hidden_size, num_heads, build_settings(name, settings), **kwargs)


def describe_attention(name: str) -> dict[str, Any]:
    """Paper (with its link and BibTeX citation), equations, complexity, default settings and capabilities of
    mechanism ``name``."""
    cls = get_attention_class(name)
    defaults = cls.settings_class().to_dict()  # as built: a default that depends on another setting resolved
    capabilities = (
        "supports_padding_mask", "carries_state", "has_aux_loss", "needs_max_length", "uses_query_key",
        "takes_local_window",
    )
    return {
        "name": name,
        "class": cls.__name__,
        "paper": cls.paper,
        "paper_url": cls.paper_url,
        "citation": cls.citation,
        "equations": cls.equations,
        "complexity": cls.complexity,
        "defaults": defaults,
        **{flag: getattr(cls, flag) for flag in capabilities},
    }
