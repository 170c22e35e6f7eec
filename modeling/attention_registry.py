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
from collections.abc import Mapping
from typing import Any

from .attention_base import EfficientAttention
from .attention_settings import AttentionSettings
from .local_settings import (
    LOCAL_PART_SETTINGS, LocalPartSettings, local_part_settings, merge_local_settings, split_local_settings,
)

_SETTINGS: dict[str, type[AttentionSettings]] = {}
_REGISTRY: dict[str, type[EfficientAttention]] = {}
_LOCAL_PARTS: dict[str, type] = {}  # kind -> the exact local part (``hybrid_attention.LocalPart``)
_COMPOSITIONS: dict[tuple[str, str | None], type] = {}  # (join, kind or None: any) -> how a mechanism joins a part
_HYBRIDS: dict[tuple[type, type, type], type] = {}  # (composition, part, mechanism) -> their class, built once


def register_settings(*names: str):
    """Class decorator adding a settings dataclass to the registry under each of ``names`` (the mechanisms it
    configures)."""

    def decorate(cls: type[AttentionSettings]) -> type[AttentionSettings]:
        for name in names:
            registered(_SETTINGS, name, cls, "settings")
        return cls

    return decorate


def register_attention(name: str):
    """Class decorator adding a mechanism to the registry under ``name``, and its ``settings_class`` where
    :func:`register_settings` has not (the built-in mechanisms register theirs apart, for their configs)."""

    def decorate(cls: type[EfficientAttention]) -> type[EfficientAttention]:
        registered(_SETTINGS, name, cls.settings_class, "settings")
        registered(_REGISTRY, name, cls, "mechanism")
        cls.name = name
        return cls

    return decorate


def register_local_part(kind: str):
    """Class decorator adding an exact local part (a ``hybrid_attention.LocalPart``) under ``kind``, the
    ``LocalPartSettings.kind`` that builds it."""

    def decorate(cls: type) -> type:
        registered(_LOCAL_PARTS, kind, cls, "local part")
        cls.kind = kind
        return cls

    return decorate


def register_composition(join: str, kind: str | None = None):
    """Class decorator adding a composition of a mechanism and its local part (a ``hybrid_attention.HybridAttention``)
    under ``join`` (``"mixed"``, or ``"shared"`` for a kernelized mechanism under the part's normaliser), for the
    parts of ``kind`` (None: any)."""

    def decorate(cls: type) -> type:
        registered(_COMPOSITIONS, (join, kind), cls, "composition")
        cls.composition = cls
        return cls

    return decorate


def hybrid_class(mechanism: type[EfficientAttention], local: LocalPartSettings) -> type[EfficientAttention]:
    """``mechanism`` composed with the local part that ``local`` declares (:func:`composition_for`)."""
    return composed_class(composition_for(mechanism, local), _LOCAL_PARTS[local.kind], mechanism)


def composition_for(mechanism: type[EfficientAttention], local: LocalPartSettings) -> type:
    """The composition that joins ``mechanism`` to the local part ``local``: under the part's normaliser where it
    shares it, else mixed; the one registered for the part's kind, else for any."""
    join = "shared" if local.shares_normaliser(mechanism.settings_class.local_part_role) else "mixed"
    return _COMPOSITIONS.get((join, local.kind)) or _COMPOSITIONS[join, None]


def composed_class(composition: type, part: type, mechanism: type[EfficientAttention]) -> type[EfficientAttention]:
    """The class of ``mechanism`` beside the local ``part`` by ``composition``: ``<Mechanism>With<Part>``, the
    composition first, then the mechanism; one class per triple, built at run time."""
    if (composition, part, mechanism) not in _HYBRIDS:
        _HYBRIDS[composition, part, mechanism] = type(f"{mechanism.__name__}With{part.__name__}", (
            composition, mechanism), {"local_part_class": part, "mechanism_class": mechanism})
    return _HYBRIDS[composition, part, mechanism]


def empty_hybrid(composition: type, part: type, mechanism: type[EfficientAttention]) -> EfficientAttention:
    """An instance of :func:`composed_class`'s class, not initialised: what unpickling a hybrid starts from."""
    cls = composed_class(composition, part, mechanism)
    return cls.__new__(cls)


def registered(registry: dict, name: str, cls: type, kind: str) -> None:
    """Put ``cls`` in ``registry`` under ``name``, which must be free (or ``cls``'s already)."""
    if name in registry and registry[name] is not cls:
        raise ValueError(f"The name {name!r} is already registered, for the {kind} {registry[name].__name__}: "
                         "choose another name.")
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
    """``registry[name]`` for an ``attention_type``; a name that is not a string, or not known, lists the known
    ones."""
    if not isinstance(name, str):
        raise TypeError(f"Invalid attention_type={name!r}: it must be a string, one of {', '.join(registry)}.")
    if name not in registry:
        close = difflib.get_close_matches(name, registry, n=3)
        hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
        raise ValueError(f"Unknown attention_type {name!r}. Known: {', '.join(registry)}.{hint}")
    return registry[name]


def get_attention_class(name: str) -> type[EfficientAttention]:
    """The mechanism class registered as ``name``; an unknown name lists the known ones."""
    return registry_entry(_REGISTRY, name)


def get_settings_class(name: str) -> type[AttentionSettings]:
    """The settings class registered as ``name`` (what a config checks); an unknown name lists the known ones."""
    return registry_entry(_SETTINGS, name)


def build_settings(name: str, settings: dict[str, Any] | AttentionSettings | None = None) -> AttentionSettings:
    """The settings dataclass of mechanism ``name`` from a dict (missing keys take the paper defaults)."""
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


def build_attention(
    name: str,
    hidden_size: int,
    num_heads: int,
    settings: dict[str, Any] | AttentionSettings | None = None,
    local: dict[str, Any] | LocalPartSettings | None = None,
    **kwargs: Any,
) -> EfficientAttention:
    """Build mechanism ``name`` with its ``settings``, composed with the exact local part ``local`` (the model's, see
    ``local_settings.py``) where layer ``layer_idx`` has it (``hybrid_attention.py``); ``kwargs``: ``max_length``,
    ``layer_idx``, ``attention_dropout``, ``qkv_bias``. The local part's settings may also be given among ``settings``,
    as folders saved before 0.3 keep them."""
    if local is None or isinstance(local, Mapping):  # given here, checked here (a config's, by the config)
        settings, local = resolved_attention(name, settings, local, kwargs.get("max_length"))
    else:
        settings = build_settings(name, settings)
    cls = get_attention_class(name)
    if local is not None and local.in_layer(kwargs.get("layer_idx", 0)):
        cls = hybrid_class(cls, local)
        kwargs["local"] = local
    return cls(hidden_size, num_heads, settings, **kwargs)


def resolved_attention(name: str, settings: dict[str, Any] | AttentionSettings | None, local: dict[str, Any] | None,
                       max_length: int | None) -> tuple[AttentionSettings, LocalPartSettings | None]:
    """Mechanism ``name``'s settings and the local part beside it (None without one), each checked, the part against
    the mechanism and ``max_length``: from ``settings`` and the part's settings ``local`` (name -> value; a default
    counts as not given), which may also stand among ``settings``, as folders saved before 0.3 keep them."""
    own, legacy = split_local_settings(settings) if isinstance(settings, Mapping) else (settings, {})
    settings = build_settings(name, own)
    part = local_part_settings(merge_local_settings(dict(local or {}), legacy), settings.local_part_role)
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
