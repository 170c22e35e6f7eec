"""The contract every attention mechanism follows, its settings, and the registry of mechanisms.

A mechanism is an ``nn.Module`` that owns its query/key/value projections (named as in RoBERTa,
``query``, ``key``, ``value``, so pretrained weights load into it) and any parameters of its own,
and maps the layer input to the per-token context *before* the output projection::

    forward(hidden_states [B, N, C], padding_mask [B, N] bool (True = real token) or None,
            state (whatever the previous layer handed on) or None,
            output_attentions: bool)
        -> AttentionOutput(context [B, N, C], state, aux_loss (scalar) or None,
                           attentions [B, h, N, N] or None)

Capabilities are class attributes, read by the encoder and the models so that they never branch
on a mechanism's name:

* ``supports_padding_mask``: real tokens never see pads.
* ``carries_state``: ``state`` flows from layer to layer (Singularformer's residual scores, DBA's Z).
* ``has_aux_loss``: returns a regularisation loss in training mode.
* ``needs_max_length``: has parameters sized by the model's maximum length; longer inputs are an error.
* ``uses_query_key``: has ``query`` and ``key`` projections (PSF has only ``value``).

Settings are a frozen dataclass per mechanism (``settings_class``), with paper defaults, built from a
plain dict by :func:`build_settings`, which rejects unknown names and out-of-range values with an error
that names the setting and what is allowed.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import nn


@dataclass
class AttentionOutput:
    """What a mechanism returns; shapes are given in the module docstring."""

    context: torch.Tensor
    state: Any = None
    aux_loss: torch.Tensor | None = None
    attentions: torch.Tensor | None = None


@dataclass(frozen=True)
class AttentionSettings:
    """Base of every mechanism's settings. Subclasses add fields and override :meth:`check`."""

    def check(self, hidden_size: int, num_heads: int, max_length: int | None) -> None:
        """Raise ``ValueError`` for values that do not fit the model's shape."""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def require(condition: bool, setting: str, value: Any, allowed: str) -> None:
    """Raise a ``ValueError`` naming ``setting``, its ``value`` and the ``allowed`` range."""
    if not condition:
        raise ValueError(f"Invalid attention setting {setting}={value!r}: it must be {allowed}.")


class EfficientAttention(nn.Module):
    """Base class of all mechanisms; see the module docstring for the contract."""

    name: ClassVar[str]
    settings_class: ClassVar[type[AttentionSettings]] = AttentionSettings
    paper: ClassVar[str] = ""  # authors, title, venue and year
    paper_url: ClassVar[str | None] = None  # a link to the paper: only an identifier printed in it (its DOI, arXiv id)
    equations: ClassVar[str] = ""  # where the paper defines what the class computes: the one source of this reference
    citation: ClassVar[str] = ""  # BibTeX
    complexity: ClassVar[str] = ""
    supports_padding_mask: ClassVar[bool] = True
    carries_state: ClassVar[bool] = False
    has_aux_loss: ClassVar[bool] = False
    needs_max_length: ClassVar[bool] = False
    uses_query_key: ClassVar[bool] = True

    def __init__(
        self,
        hidden_size: int,
        num_heads: int,
        settings: AttentionSettings,
        *,
        max_length: int | None = None,
        layer_idx: int = 0,
        attention_dropout: float = 0.0,
        qkv_bias: bool = True,
    ):
        super().__init__()
        self.settings = settings
        if hidden_size % num_heads:
            raise ValueError(
                f"hidden_size={hidden_size} is not divisible by num_attention_heads={num_heads}: "
                "choose a head count that divides the width."
            )
        if self.needs_max_length and not max_length:
            raise ValueError(f"The {self.name!r} attention needs the model's maximum length (max_length).")
        settings.check(hidden_size, num_heads, max_length)
        self.hidden_size = hidden_size
        self.num_heads = num_heads
        self.head_dim = hidden_size // num_heads
        self.max_length = max_length
        self.layer_idx = layer_idx
        self.dropout = nn.Dropout(attention_dropout)
        if self.uses_query_key:
            self.query = nn.Linear(hidden_size, hidden_size, bias=qkv_bias)
            self.key = nn.Linear(hidden_size, hidden_size, bias=qkv_bias)
        self.value = nn.Linear(hidden_size, hidden_size, bias=qkv_bias)

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        """``[B, N, h * d] -> [B, h, N, d]``."""
        batch, length, _ = x.shape
        return x.view(batch, length, self.num_heads, -1).transpose(1, 2)

    @staticmethod
    def merge_heads(x: torch.Tensor) -> torch.Tensor:
        """``[B, h, N, d] -> [B, N, h * d]``."""
        batch, heads, length, dim = x.shape
        return x.transpose(1, 2).reshape(batch, length, heads * dim)

    def check_length(self, length: int) -> None:
        """Raise when a mechanism with a fixed maximum length gets a longer input."""
        if self.needs_max_length and length > self.max_length:
            raise ValueError(
                f"Sequence length {length} exceeds the maximum length {self.max_length} that the "
                f"{self.name!r} attention was built for: truncate the input or build the model with a "
                "larger max_position_embeddings."
            )

    def reset_parameters(self, std: float = 0.02) -> None:
        """Initialise the mechanism's own raw parameters with ``transformers.initialization`` functions (which
        skip loaded ones); ``nn.Linear`` sub-modules, the projections included, are initialised by the model."""

    def extra_repr(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.settings.to_dict().items())


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
    settings = dict(settings or {})
    known = [f.name for f in dataclasses.fields(settings_class)]
    unknown = sorted(set(settings) - set(known))
    if unknown:
        raise ValueError(
            f"Unknown setting(s) {', '.join(unknown)} for attention {name!r}. "
            f"Valid settings: {', '.join(known) or 'none'}."
        )
    return settings_class(**settings)


def build_attention(
    name: str,
    hidden_size: int,
    num_heads: int,
    settings: dict[str, Any] | AttentionSettings | None = None,
    **kwargs: Any,
) -> EfficientAttention:
    """Instantiate mechanism ``name``; ``kwargs`` are ``max_length``, ``layer_idx``, ``attention_dropout``, ``qkv_bias``."""
    return get_attention_class(name)(hidden_size, num_heads, build_settings(name, settings), **kwargs)


def describe_attention(name: str) -> dict[str, Any]:
    """Paper (with its link and BibTeX citation), equations, complexity, default settings and capabilities of
    mechanism ``name``."""
    cls = get_attention_class(name)
    defaults = {f.name: f.default for f in dataclasses.fields(cls.settings_class)}
    capabilities = (
        "supports_padding_mask", "carries_state", "has_aux_loss", "needs_max_length", "uses_query_key"
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


def log2_ceil(n: int) -> int:
    """``ceil(log2(n))`` for ``n >= 1`` (0 for n = 1)."""
    return max(0, math.ceil(math.log2(n)))
