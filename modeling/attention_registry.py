"""The registry of attention mechanisms: each registers its settings and its class under a name, and configs and
models build them by that name.

    @dataclass(frozen=True)
    class EfficientSettings(AttentionSettings): ...

    @register_attention("efficient")
    class EfficientLinearAttention(EfficientAttention):
        settings_class = EfficientSettings

    list_attentions()                                   # names, in registration order
    build_attention("kerformer", 768, 12, {"se_mode": "channel"}, max_length=512)
    describe_attention("dba")                           # paper, equations, defaults and capabilities

``register_attention`` registers the settings class too; the built-in mechanisms register theirs apart
(``@register_settings("kerformer")``), so that a config needs none of the mechanisms' code: a saved folder's
``configuration_effattn.py`` holds the settings, its modeling file the mechanism (``remote_code.py``).
Import mechanisms through ``attentions.py``, which imports every built-in one, so that the registry is complete.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
from collections.abc import Mapping
from typing import Any

from .attention_base import EfficientAttention
from .attention_settings import AttentionSettings
from .local_settings import (
    LOCAL_PART_SETTINGS, WITH_THE_PACKAGE, LocalPartSettings, current_spelling, local_part_settings,
)

_SETTINGS: dict[str, type[AttentionSettings]] = {}
_REGISTRY: dict[str, type[EfficientAttention]] = {}
_LOCAL_PARTS: dict[str, type] = {}  # kind -> LocalPart subclass
_COMPOSITIONS: dict[tuple[str, str | None], type] = {}  # (join, kind or None: any) -> composition


def register_settings(*names: str):
    """Class decorator registering a settings dataclass for the mechanisms ``names``."""

    def decorate(cls: type[AttentionSettings]) -> type[AttentionSettings]:
        for name in names:
            registered(_SETTINGS, name, cls, "settings")
        return cls

    return decorate


def register_attention(name: str):
    """Class decorator registering a mechanism as ``name``, with its ``settings_class``."""

    def decorate(cls: type[EfficientAttention]) -> type[EfficientAttention]:
        registered(_SETTINGS, name, cls.settings_class, "settings")
        registered(_REGISTRY, name, cls, "mechanism")
        cls.name = name
        return cls

    return decorate


def register_local_part(kind: str):
    """Class decorator registering an exact local part (a ``LocalPart`` subclass) as ``kind``."""

    def decorate(cls: type) -> type:
        registered(_LOCAL_PARTS, kind, cls, "local part")
        cls.kind = kind
        return cls

    return decorate


def register_composition(join: str, kind: str | None = None):
    """Class decorator registering how a mechanism joins a part of ``kind`` (None: any), ``"mixed"`` or ``"shared"``."""

    def decorate(cls: type) -> type:
        registered(_COMPOSITIONS, (join, kind), cls, "composition")
        cls.composition = cls
        return cls

    return decorate


def hybrid_class(mechanism: type[EfficientAttention], local: LocalPartSettings) -> type[EfficientAttention]:
    """``mechanism`` composed with the local part ``local``."""
    return composed_class(composition_for(mechanism, local), _LOCAL_PARTS[local.kind], mechanism)


def without_hybrid_class(mechanism: type[EfficientAttention], local: Any) -> type[EfficientAttention]:
    """What stands for :func:`hybrid_class` in the code of a Hub folder whose model has no local part (its config
    refuses one before): a ``ValueError``."""
    raise ValueError(f"This model's code has no local part: {WITH_THE_PACKAGE}")


def composition_for(mechanism: type[EfficientAttention], local: LocalPartSettings) -> type:
    """The composition joining ``mechanism`` to ``local``: registered for the part's kind, else for any kind."""
    join = "shared" if local.shares_normaliser(mechanism.settings_class.local_part_role) else "mixed"
    composition = _COMPOSITIONS.get((join, local.kind)) or _COMPOSITIONS.get((join, None))
    if composition is None or local.kind not in _LOCAL_PARTS:
        raise ValueError(f"This model's code cannot build a {local.kind} local part "
                         f"{'under its normaliser' if join == 'shared' else 'mixed per head'}: a Hub folder's code "
                         f"holds the one it was saved with only. {WITH_THE_PACKAGE}")
    return composition


@functools.cache
def composed_class(composition: type, part: type, mechanism: type[EfficientAttention]) -> type[EfficientAttention]:
    """``<Mechanism>With<Part>``: the ``composition`` first, then ``mechanism``; one class per triple."""
    return type(f"{mechanism.__name__}With{part.__name__}", (composition, mechanism),
                {"local_part_class": part, "mechanism_class": mechanism})


def empty_hybrid(composition: type, part: type, mechanism: type[EfficientAttention]) -> EfficientAttention:
    """An empty instance of :func:`composed_class`'s class, to unpickle a hybrid into."""
    cls = composed_class(composition, part, mechanism)
    return cls.__new__(cls)


def registered(registry: dict, name: str, cls: type, kind: str) -> None:
    """``registry[name] = cls``; a ``ValueError`` where ``name`` is another class's."""
    if name in registry and registry[name] is not cls:
        raise ValueError(f"The name {name!r} is already registered, for the {kind} {registry[name].__name__}: "
                         "choose another name.")
    registry[name] = cls


def registered_once(registry: dict, name: str, cls: type, kind: str) -> None:
    """:func:`registered` in a Hub folder's code, which registers its own classes once: ``registry[name] = cls``."""
    registry[name] = cls


def put_first(names: list[str]) -> None:
    """Order the registry with ``names`` first, in that order, the others after them in registration order: the
    built-in mechanisms in ``attentions.py``'s order, whichever module a program imported first."""
    for registry in (_REGISTRY, _SETTINGS):
        ordered = {name: registry[name] for name in names if name in registry}
        rest = {name: cls for name, cls in registry.items() if name not in ordered}
        registry.clear()
        registry.update({**ordered, **rest})


def list_attentions() -> list[str]:
    """Names of the registered mechanisms, in registration order."""
    return list(_REGISTRY)


def registry_entry(registry: dict, name: str):
    """``registry[name]``; an unknown ``attention_type`` lists the known ones."""
    if not isinstance(name, str):
        raise TypeError(f"Invalid attention_type={name!r}: it must be a string, one of {', '.join(registry)}.")
    if name not in registry:
        close = difflib.get_close_matches(name, registry, n=3)
        hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
        raise ValueError(f"Unknown attention_type {name!r}. Known: {', '.join(registry)}.{hint}")
    return registry[name]


def get_attention_class(name: str) -> type[EfficientAttention]:
    """The mechanism class registered as ``name``."""
    return registry_entry(_REGISTRY, name)


def get_settings_class(name: str) -> type[AttentionSettings]:
    """The settings class registered as ``name``."""
    return registry_entry(_SETTINGS, name)


def build_settings(name: str, settings: dict[str, Any] | AttentionSettings | None = None) -> AttentionSettings:
    """Mechanism ``name``'s settings from a dict (missing keys take the paper defaults)."""
    settings_class = get_settings_class(name)
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
        raise ValueError(
            f"Unknown setting(s) {', '.join(unknown)} for attention {name!r}. "
            f"Valid settings: {', '.join(known) or 'none of its own'}; the local part's "
            f"({', '.join(LOCAL_PART_SETTINGS)}) are the model's, given to its config or build_attention(local=...)."
        )
    return settings_class(**settings)


def build_attention(name: str, hidden_size: int, num_heads: int,
                    settings: dict[str, Any] | AttentionSettings | None = None,
                    local: dict[str, Any] | LocalPartSettings | None = None, **kwargs: Any) -> EfficientAttention:
    """Mechanism ``name``, with the local part ``local`` where layer ``layer_idx`` has it; ``kwargs``: ``max_length``,
    ``layer_idx``, ``attention_dropout``, ``qkv_bias``."""
    if local is None or isinstance(local, Mapping):  # a config's part is checked already
        values = current_spelling({"attention_config": settings, **(local or {})})
        settings, local = resolved_attention(name, values.pop("attention_config"), values, kwargs.get("max_length"))
    else:
        settings = build_settings(name, settings)
    cls = get_attention_class(name)
    if local is not None and local.in_layer(kwargs.get("layer_idx", 0)):
        cls = hybrid_class(cls, local)
        kwargs["local"] = local
    return cls(hidden_size, num_heads, settings, **kwargs)


def resolved_attention(name: str, settings: dict[str, Any] | AttentionSettings | None, local: dict[str, Any] | None,
                       max_length: int | None) -> tuple[AttentionSettings, LocalPartSettings | None]:
    """Mechanism ``name``'s settings and its local part (or None) from ``local`` (name -> value), checked together."""
    settings = build_settings(name, settings)
    part = local_part_settings(dict(local or {}), settings.local_part_role)
    if part is not None:
        part.check(name, settings.local_part_role, max_length)
    return settings, part


def describe_attention(name: str) -> dict[str, Any]:
    """Paper (with its link and BibTeX citation), equations, complexity, default settings and capabilities of
    mechanism ``name``."""
    cls = get_attention_class(name)
    defaults = cls.settings_class().to_dict()  # as built: a default that depends on another setting resolved
    capabilities = ("supports_padding_mask", "carries_state", "has_aux_loss", "needs_max_length", "uses_query_key")
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
        "local_part_role": cls.settings_class.local_part_role,
    }
