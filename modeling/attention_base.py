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
projections when the caller has them already); the base class's ``forward`` checks the length and runs it, alone
or beside the exact local window.

The local window (``local_window``, ``global_tokens``, ``local_window_every``: settings every mechanism has, off by
default, see ``local_window.py``): each token attends exactly, with softmax, to the tokens within ``local_window // 2``
ranks of it (and to the global tokens), and through the mechanism to the rest, in every layer or in one layer of
``local_window_every`` (the others run the mechanism alone). Two ways of putting the parts together:

* kernelized mechanisms (``kernel_attention.py``) share one normaliser (their setting ``shared_normaliser``, true
  beside a window by default): the mechanism's terms stand for the keys outside the window, weighted per head by
  ``sigma(mechanism_logit)`` (LoLCATs);
* every other mechanism is mixed per head: ``(1 - sigma) window(x) + sigma mechanism(x)`` (:meth:`EfficientAttention.
  attend_with_window`).

Capabilities are class attributes, read by the encoder and the models so that they never branch
on a mechanism's name:

* ``supports_padding_mask``: real tokens never see pads.
* ``carries_state``: ``state`` flows from layer to layer (Singularformer's residual scores, DBA's Z).
* ``has_aux_loss``: returns a regularisation loss in training mode.
* ``needs_max_length``: has parameters sized by the model's maximum length; longer inputs are an error. Such a
  mechanism defines :meth:`EfficientAttention.extend_length_sized_weights`, its rule for growing them when the
  model's positions are extended (``from_pretrained(..., max_length=N)``, ``position_extension``).
* ``uses_query_key``: has ``query`` and ``key`` projections (PSF has only ``value``; with a local window every
  mechanism has them, since the window needs them).
* ``takes_local_window``: takes the window settings (softmax attention does not: it is exact over every token
  already).
* ``has_own_kernels``: the fast path is the mechanism's own CUDA kernels, called from :meth:`EfficientAttention.attend`
  where ``fast_paths.takes_fast_path`` allows (PSF's factor product, ``chord_kernels.py``), not the layer compiled.

Settings: ``attention_settings.py`` (the contract for a mechanism's settings, the local parts' and their checks).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import nn

from .attention_settings import AttentionSettings, check_heads
from .fast_paths import run_fast, takes_fast_path
from .local_blocks import LocalBlocks
from .local_window import LocalPart, LocalWindow

@dataclass
class AttentionOutput:
    """What a mechanism returns; shapes are given in the module docstring."""

    context: torch.Tensor
    state: Any = None
    aux_loss: torch.Tensor | None = None
    attentions: torch.Tensor | None = None


class EfficientAttention(nn.Module):
    """Base class of all mechanisms; see the module docstring for the contract."""

    name: ClassVar[str]
    settings_class: ClassVar[type[AttentionSettings]] = AttentionSettings
    paper: ClassVar[str] = ""  # authors, title, venue and year
    paper_url: ClassVar[str | None] = None  # a link to the paper: its DOI or arXiv id, from the publisher's record
    equations: ClassVar[str] = ""  # where the paper defines what the class computes: the one source of this reference
    citation: ClassVar[str] = ""  # BibTeX
    complexity: ClassVar[str] = ""
    supports_padding_mask: ClassVar[bool] = True
    carries_state: ClassVar[bool] = False
    has_aux_loss: ClassVar[bool] = False
    needs_max_length: ClassVar[bool] = False
    uses_query_key: ClassVar[bool] = True
    takes_local_window: ClassVar[bool] = True
    has_own_kernels: ClassVar[bool] = False
    # The gate's default start sigma(mechanism_logit), the weight of the mechanism's part beside a local part (the
    # setting initial_mechanism_weight overrides it; the kernelized mechanisms' in ``kernel_attention.py``): beside a
    # window 0.5, an even mix for a mechanism that is trained with it anyway; beside aligned blocks 0.01, so that a
    # freshly converted block hybrid reads as the chunked reader it came from and the memory's weight grows only as
    # training finds it useful. Saved models keep the gates they were saved with (the logit is a saved parameter).
    window_mechanism_weight: ClassVar[float | None] = 0.5
    block_mechanism_weight: ClassVar[float | None] = 0.01
    # With ``needs_max_length``: another way to lift the limit, a clause starting ", or" (ends the length errors).
    length_limit_fix: ClassVar[str] = ""

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
        check_heads(hidden_size, num_heads)
        if self.needs_max_length and not max_length:
            raise ValueError(f"The {self.name!r} attention needs the model's maximum length (max_length).")
        settings.check(hidden_size, num_heads, max_length)
        self.window = self.build_window(num_heads, settings, layer_idx)
        self.parts = "both"  # with a window: "both", or "window" / "mechanism" alone (see :meth:`forward`)
        if self.window is not None:
            self.uses_query_key = True  # the window attends with the query and key projections
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

    def build_window(self, num_heads: int, settings: AttentionSettings, layer_idx: int) -> LocalPart | None:
        """The exact local part beside the mechanism (with its per-head gate), ``self.window``: aligned blocks
        (``local_block``), a sliding window (``local_window``), or None without one (neither, or a layer that
        ``local_window_every`` leaves to the mechanism alone)."""
        if settings.local_block is not None:
            return LocalBlocks(num_heads, settings.local_block, settings.global_tokens,
                               mechanism_weight=self.gate_start(settings, blocks=True))
        if settings.local_window is None or layer_idx % settings.local_window_every:
            return None
        return LocalWindow(num_heads, settings.local_window, settings.global_tokens,
                           mechanism_weight=self.gate_start(settings, blocks=False))

    @classmethod
    def gate_start(cls, settings: AttentionSettings, blocks: bool) -> float | None:
        """The gate's initial value beside aligned blocks (``blocks``) or a window: the setting, else
        :meth:`default_gate_start` (None: no mechanism beside)."""
        default = cls.default_gate_start(settings, blocks)
        return default if default is None or settings.initial_mechanism_weight is None \
            else settings.initial_mechanism_weight

    @classmethod
    def default_gate_start(cls, settings: AttentionSettings, blocks: bool) -> float | None:
        """The mechanism's default start beside blocks or a window (the class attributes above)."""
        return cls.block_mechanism_weight if blocks else cls.window_mechanism_weight

    def project(self, hidden_states: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Queries, keys and values ``[B, h, N, d]`` from ``hidden_states [B, N, C]``."""
        return tuple(self.split_heads(proj(hidden_states)) for proj in (self.query, self.key, self.value))

    def forward(self, hidden_states, padding_mask=None, state=None, output_attentions=False) -> AttentionOutput:
        """See the module docstring. On CUDA, without ``output_attentions``, the layer takes its fast path where
        ``fast_paths.py``'s mode allows: :meth:`exact_forward` compiled (the same function, fused), or with
        ``has_own_kernels`` the mechanism's kernels inside it; elsewhere :meth:`exact_forward` as written."""
        self.check_length(hidden_states.shape[1])
        name = f"the {self.name!r} attention"
        if not (output_attentions or self.has_own_kernels) and takes_fast_path(name, hidden_states):
            context, state, aux_loss = run_fast(name, type(self).tensors_forward, self, hidden_states, padding_mask,
                                                state)
            return AttentionOutput(context, state, aux_loss)
        return self.exact_forward(hidden_states, padding_mask, state, output_attentions)

    def exact_forward(self, hidden_states, padding_mask=None, state=None, output_attentions=False) -> AttentionOutput:
        """The exact path. With a local part, ``self.parts`` chooses what runs: ``"both"`` (the default),
        ``"window"`` (the mechanism's part switched off) or ``"mechanism"`` (the local part switched off: the
        mechanism alone, as without one); training code sets it (window dropout, ablations), it is not saved."""
        if self.window is None or self.parts == "mechanism":
            return self.attend(hidden_states, padding_mask, state, output_attentions)
        return self.attend_with_window(hidden_states, padding_mask, state, output_attentions)

    def tensors_forward(self, hidden_states, padding_mask=None, state=None):
        """:meth:`exact_forward`'s context, state and auxiliary loss as a tuple (what the compiled fast path
        returns)."""
        output = self.exact_forward(hidden_states, padding_mask, state)
        return output.context, output.state, output.aux_loss

    def attend(self, hidden_states, padding_mask=None, state=None, output_attentions=False,
               projections=None) -> AttentionOutput:
        """The mechanism alone (the paper's attention): arguments and result as ``forward``'s; ``projections``:
        :meth:`project`'s queries, keys and values when the caller computed them already."""
        raise NotImplementedError

    def attend_with_window(self, hidden_states, padding_mask=None, state=None,
                           output_attentions=False) -> AttentionOutput:
        """The window and the mechanism mixed per head: ``(1 - sigma) window + sigma mechanism``, sigma =
        ``sigmoid(window.mechanism_logit)`` ``[h]``; the global tokens' rows are the window's alone (exact)."""
        projections = self.project(hidden_states)
        window = self.window.attend(*projections, padding_mask, self.dropout, output_attentions)
        if self.parts == "window":  # the mechanism's output unused; the state it carries still reaches the layers
            # that run it alone (those that local_window_every leaves without a window)
            state = self.attend(hidden_states, padding_mask, state, projections=projections).state \
                if self.carries_state and self.settings.local_window_every > 1 else None
            return AttentionOutput(self.merge_heads(window.context), state, attentions=window.attentions)
        mechanism = self.attend(hidden_states, padding_mask, state, output_attentions, projections)
        weight = self.window.mechanism_weight()[:, None, None]  # [h, 1, 1]
        context = self.mixed(window.context, self.split_heads(mechanism.context), weight, window.global_rows)
        attentions = None
        if output_attentions:
            attentions = self.mixed(window.attentions, mechanism.attentions, weight, window.global_rows)
        return AttentionOutput(self.merge_heads(context), mechanism.state, mechanism.aux_loss, attentions)

    def mixed(self, local: torch.Tensor, mechanism: torch.Tensor, weight: torch.Tensor,
              global_rows: torch.Tensor) -> torch.Tensor:
        """``(1 - weight) local + weight mechanism`` (one fused ``torch.lerp``, in the widest of the three dtypes) for
        ``[B, h, N, *]`` tensors and ``weight [h, 1, 1]``, but the local part's own rows at the global tokens
        (``global_rows [B or 1, N]``)."""
        dtype = torch.promote_types(torch.promote_types(local.dtype, mechanism.dtype), weight.dtype)
        mixed = torch.lerp(local.to(dtype), mechanism.to(dtype), weight.to(dtype))
        if not self.window.global_tokens:
            return mixed
        return torch.where(global_rows[:, None, :, None], local, mixed)

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        """``[B, N, h * d] -> [B, h, N, d]`` (any ``d``; explicit, so that an empty batch keeps its shape)."""
        batch, length, width = x.shape
        return x.view(batch, length, self.num_heads, width // self.num_heads).transpose(1, 2)

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
                f"{self.name!r} attention was built for: shorten the input or build the attention with a larger "
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
        """Initialise the mechanism's own raw parameters with ``transformers.initialization`` functions (which
        skip loaded ones); ``nn.Linear`` sub-modules, the projections included, are initialised by the model."""

    def extra_repr(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.settings.to_dict().items())


def log2_ceil(n: int) -> int:
    """``ceil(log2(n))`` for ``n >= 1`` (0 for n = 1)."""
    return max(0, math.ceil(math.log2(n)))
