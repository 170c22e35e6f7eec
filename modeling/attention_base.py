"""The contract every attention mechanism follows (its settings: ``attention_settings.py``; the registry:
``attention_registry.py``).

A mechanism is an ``nn.Module`` that owns its query/key/value projections (named as in RoBERTa,
``query``, ``key``, ``value``, so pretrained weights load into it) and any parameters of its own,
and maps the layer input to the per-token context *before* the output projection::

    forward(hidden_states [B, N, C], padding_mask [B, N] bool (True = real token) or None,
            state (whatever the previous layer handed on) or None,
            output_attentions: bool)
        -> AttentionOutput(context [B, N, C], state, aux_loss (scalar) or None,
                           attentions [B, h, N, N] or None)

A mechanism implements :meth:`EfficientAttention.attend` (the same arguments, plus the query/key/value
projections when the caller has them already); the base class's ``forward`` checks the length and runs it, on its
fast path where one applies (``fast_paths.py``). A mechanism knows nothing of an exact local part: the encoder layer
composes one beside it where the model declares one (``hybrid_attention.py``).

Capabilities are class attributes, read by the encoder and the models so that they never branch
on a mechanism's name:

* ``supports_padding_mask``: real tokens never see pads.
* ``carries_state``: ``state`` flows from layer to layer (Singularformer's residual scores, DBA's Z).
* ``has_aux_loss``: returns a regularisation loss in training mode.
* ``needs_max_length``: has parameters sized by the model's maximum length; longer inputs are an error. Such a
  mechanism defines :meth:`EfficientAttention.extend_length_sized_weights`, its rule for growing them when the
  model's positions are extended (``from_pretrained(..., max_length=N)``, ``position_extension``).
* ``uses_query_key``: has ``query`` and ``key`` projections (PSF has only ``value``; beside a local part every
  mechanism has them, since the part needs them).
* ``has_own_kernels``: the fast path is the mechanism's own CUDA kernels, called from :meth:`EfficientAttention.attend`
  where ``fast_paths.takes_fast_path`` allows (PSF's factor product, ``chord_kernels.py``), not the layer compiled.

The fast path (:meth:`EfficientAttention.fast_forward`) is the package's only: a Hub folder's generated code runs the
exact path, :meth:`EfficientAttention.exact_forward`, where a hybrid adds its local part. ``length_limit_fix``
completes the error of a mechanism with ``needs_max_length`` on a longer input. :meth:`EfficientAttention.split_heads`
reshapes with explicit sizes, so that an empty batch keeps its shape. :meth:`EfficientAttention.reset_parameters`
initialises the mechanism's own raw parameters with ``transformers.initialization``, which skips loaded ones; the
model initialises the ``nn.Linear`` layers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import nn

from .attention_settings import AttentionSettings, check_heads
from .fast_paths import run_fast, takes_fast_path


@dataclass
class AttentionOutput:
    """``context [B, N, C]``, ``state``, ``aux_loss`` and ``attentions [B, h, N, N]``."""

    context: torch.Tensor
    state: Any = None
    aux_loss: torch.Tensor | None = None
    attentions: torch.Tensor | None = None


class EfficientAttention(nn.Module):
    """Base of the mechanisms, which implement :meth:`attend` (contract: the module docstring)."""

    name: ClassVar[str]
    settings_class: ClassVar[type[AttentionSettings]] = AttentionSettings
    paper: ClassVar[str] = ""  # authors, title, venue and year
    paper_url: ClassVar[str | None] = None  # its DOI or arXiv link
    equations: ClassVar[str] = ""  # the paper's sections and equations that the class computes
    citation: ClassVar[str] = ""  # BibTeX
    complexity: ClassVar[str] = ""
    supports_padding_mask: ClassVar[bool] = True
    carries_state: ClassVar[bool] = False
    has_aux_loss: ClassVar[bool] = False
    needs_max_length: ClassVar[bool] = False
    uses_query_key: ClassVar[bool] = True
    has_own_kernels: ClassVar[bool] = False
    length_limit_fix: ClassVar[str] = ""

    def __init__(self, hidden_size: int, num_heads: int, settings: AttentionSettings, *, max_length: int | None = None,
                 layer_idx: int = 0, attention_dropout: float = 0.0, qkv_bias: bool = True):
        super().__init__()
        self.settings = settings
        check_heads(hidden_size, num_heads)
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

    def project(self, hidden_states: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``Q, K, V [B, h, N, d]`` of ``hidden_states [B, N, C]``."""
        return tuple(self.split_heads(proj(hidden_states)) for proj in (self.query, self.key, self.value))

    def forward(self, hidden_states, padding_mask=None, state=None, output_attentions=False) -> AttentionOutput:
        """:meth:`fast_forward`, else :meth:`exact_forward`."""
        self.check_length(hidden_states.shape[1])
        fast = None if output_attentions else self.fast_forward(hidden_states, padding_mask, state)
        return fast if fast is not None else self.exact_forward(hidden_states, padding_mask, state, output_attentions)

    def fast_forward(self, hidden_states, padding_mask=None, state=None) -> AttentionOutput | None:
        """Compiled :meth:`exact_forward` (``fast_paths.py``), or None."""
        name = f"the {self.name!r} attention"
        if self.has_own_kernels or not takes_fast_path(name, hidden_states):
            return None
        context, state, aux_loss = run_fast(name, type(self).tensors_forward, self, hidden_states, padding_mask, state)
        return AttentionOutput(context, state, aux_loss)

    def exact_forward(self, hidden_states, padding_mask=None, state=None, output_attentions=False) -> AttentionOutput:
        """:meth:`attend`; a hybrid adds its local part here."""
        return self.attend(hidden_states, padding_mask, state, output_attentions)

    def tensors_forward(self, hidden_states, padding_mask=None, state=None):
        """:meth:`exact_forward`'s context, state and auxiliary loss as a tuple (what the compiled fast path
        returns)."""
        output = self.exact_forward(hidden_states, padding_mask, state)
        return output.context, output.state, output.aux_loss

    def attend(self, hidden_states, padding_mask=None, state=None, output_attentions=False,
               projections=None) -> AttentionOutput:
        """The paper's attention; ``projections``: :meth:`project`'s output, if known."""
        raise NotImplementedError

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        """``[B, N, h * d] -> [B, h, N, d]``, any ``d``."""
        batch, length, width = x.shape
        return x.view(batch, length, self.num_heads, width // self.num_heads).transpose(1, 2)

    @staticmethod
    def merge_heads(x: torch.Tensor) -> torch.Tensor:
        """``[B, h, N, d] -> [B, N, h * d]``."""
        batch, heads, length, dim = x.shape
        return x.transpose(1, 2).reshape(batch, length, heads * dim)

    def check_length(self, length: int) -> None:
        """Raise past a fixed ``max_length``."""
        if self.needs_max_length and length > self.max_length:
            raise ValueError(
                f"Sequence length {length} exceeds the maximum length {self.max_length} that the "
                f"{self.name!r} attention was built for: shorten the input or build with a larger "
                f"max_length{self.length_limit_fix}."
            )

    def extend_max_length(self, max_length: int) -> None:
        """Take inputs of up to ``max_length`` tokens (at least the current maximum), in place: the weights sized
        by the maximum length (``needs_max_length``) grow by :meth:`extend_length_sized_weights`."""
        if self.max_length is not None and max_length < self.max_length:
            raise ValueError(f"The {self.name!r} attention cannot shrink from max_length={self.max_length} to "
                             f"{max_length}: extend only.")
        self.settings.check(self.hidden_size, self.num_heads, max_length)
        if self.needs_max_length and max_length > self.max_length:
            self.extend_length_sized_weights(max_length)
        self.max_length = max_length

    def extend_length_sized_weights(self, max_length: int) -> None:
        """The mechanism's rule for growing its weights sized by ``self.max_length`` to ``max_length``, in place
        (parameters replaced under ``torch.no_grad``). Every mechanism with ``needs_max_length`` defines one, chosen
        so that inputs of up to the old maximum are computed as before, and says in its docstring what is exact
        and what is not."""
        raise NotImplementedError(
            f"The {self.name!r} attention has weights sized by the maximum length but no rule to extend them: "
            "define extend_length_sized_weights."
        )

    def reset_parameters(self, std: float = 0.02) -> None:
        """Initialise the mechanism's own parameters."""

    def extra_repr(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.settings.to_dict().items())


def log2_ceil(n: int) -> int:
    """``ceil(log2(n))`` for ``n >= 1`` (0 for n = 1)."""
    return max(0, math.ceil(math.log2(n)))
