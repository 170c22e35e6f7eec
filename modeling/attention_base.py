"""The contract every attention mechanism follows and its settings (the registry: ``attention_registry.py``).

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

* kernelized mechanisms (``kernel_attention.py``) share one normaliser: the mechanism's terms stand for the keys
  outside the window, weighted per head by ``sigma(mechanism_logit)`` (LoLCATs);
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

Settings are a frozen dataclass per mechanism (``settings_class``, a subclass of :class:`AttentionSettings`),
built from a plain dict (``attention_config``) by :func:`build_settings`, which rejects unknown names. The
contract for a mechanism's settings:

* Every field is declared with :func:`~settings.setting`, giving its paper default, its kind and its range in
  one place; the check is generic (``settings.checked``), run when the dataclass is built, whether from a dict,
  a ``config.json`` or by hand::

      @dataclass(frozen=True)
      class ExampleSettings(AttentionSettings):
          num_features: int | None = setting(None, int, minimum=1, none_means="the head width")
          kernel: str = setting("softmax", str, choices=("softmax", "relu"))
          redraw: bool = setting(False, bool)
          eps: float = setting(1e-6, float, above=0)

  Kinds are ``bool`` (a real bool: not ``"false"``, not ``1``), ``int`` (not a bool), ``float`` (finite; an
  integer is converted) and ``str``; bounds are ``minimum`` / ``maximum`` (inclusive) and ``above`` (exclusive);
  ``choices`` lists the allowed strings; ``none_means`` allows ``None`` and says what it stands for. A wrong
  kind raises ``TypeError``, a value out of range ``ValueError``, each naming the setting, the value, what is
  expected and the default. A field declared without :func:`~settings.setting` is a ``TypeError`` at build time.
* Only constraints that depend on the model's shape go in :meth:`AttentionSettings.check_shape` (a ratio at most
  the head width, a multiple of the head count, a size that fits ``max_length``), raised with :func:`require`;
  :meth:`AttentionSettings.check` runs it after the local window's checks.
"""

from __future__ import annotations

import dataclasses
import math
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import nn

from .fast_paths import run_fast, takes_fast_path
from .local_blocks import LocalBlocks
from .local_window import LocalPart, LocalWindow
from .settings import Spec, checked, setting  # noqa: F401 (mechanisms import ``setting`` from here)

# True while a model is built at its checkpoint's size to be extended at once (``from_pretrained(..., max_length=N)``,
# ``pretrained.py``): the window is checked against the length the model will take, once extended, not this one.
WINDOW_CHECKED_WHEN_EXTENDED = ContextVar("WINDOW_CHECKED_WHEN_EXTENDED", default=False)


@dataclass
class AttentionOutput:
    """What a mechanism returns; shapes are given in the module docstring."""

    context: torch.Tensor
    state: Any = None
    aux_loss: torch.Tensor | None = None
    attentions: torch.Tensor | None = None


@dataclass(frozen=True)
class AttentionSettings:
    """Base of every mechanism's settings. Subclasses add fields declared with :func:`~settings.setting` and
    override :meth:`check` for shape-dependent constraints (see the module docstring).

    ``local_window``: w, each token attends exactly to the real tokens at most ``w // 2`` ranks away, beside the
    mechanism (``local_window.py``); None (the default) runs the mechanism alone, as published.
    ``local_block``: S, each token attends exactly to the real tokens of its own aligned block of S ranks, beside the
    mechanism, which then reads across the blocks as a memory (``local_blocks.py``: with S the checkpoint's own
    length, the chunked reader); instead of ``local_window``, not with it.
    ``global_tokens``: g, the first g real tokens ([CLS]) attend to, and are attended by, every token exactly
    (Longformer's global attention); needs ``local_window`` or ``local_block``.
    ``local_window_every``: k, the window only in layers 0, k, 2k, ... (a share 1/k of the layers), the others
    running the mechanism alone; 1 (the default) puts it in every layer. Needs ``local_window``.
    ``initial_mechanism_weight``: the gate's initial value, each head's weight ``sigma(mechanism_logit)`` on the
    mechanism's part beside the window or the blocks; None takes the mechanism's default for that part
    (:attr:`EfficientAttention.window_mechanism_weight`, :attr:`EfficientAttention.block_mechanism_weight`)."""

    local_window: int | None = setting(None, int, minimum=2, none_means="no window: the mechanism alone")
    global_tokens: int = setting(0, int, minimum=0)
    local_window_every: int = setting(1, int, minimum=1)
    local_block: int | None = setting(None, int, minimum=1, none_means="no blocks")
    initial_mechanism_weight: float | None = setting(None, float, above=0, below=1,
                                                     none_means="the mechanism's default beside its local part")

    def __post_init__(self):
        """Check every field against its declared spec; store ``int``/``float`` values as that kind."""
        for field in dataclasses.fields(self):
            if "spec" not in field.metadata:
                raise TypeError(
                    f"{type(self).__name__}.{field.name} has no declared type and range: declare it with "
                    "setting(default, kind, ...)."
                )
            value = checked(field.name, getattr(self, field.name), field.metadata["spec"], default=field.default)
            object.__setattr__(self, field.name, value)

    def check(self, hidden_size: int, num_heads: int, max_length: int | None) -> None:
        """Raise ``ValueError`` for values that do not fit the model's shape: the window's, then the mechanism's."""
        self.check_window(None if WINDOW_CHECKED_WHEN_EXTENDED.get() else max_length)
        self.check_shape(hidden_size, num_heads, max_length)

    def check_shape(self, hidden_size: int, num_heads: int, max_length: int | None) -> None:
        """The mechanism's own shape-dependent constraints (subclasses override)."""

    def check_window(self, max_length: int | None) -> None:
        """``local_window`` or ``local_block`` (one of them) fits the maximum length; ``global_tokens``,
        ``local_window_every`` and ``initial_mechanism_weight`` come with them."""
        if self.local_window is not None and max_length:
            require(self.local_window <= max_length, "local_window", self.local_window,
                    f"at most the model's maximum length {max_length} (a window that covers the whole input is full "
                    "softmax attention: use attention_type='sdpa')")
        require(self.local_block is None or self.local_window is None, "local_block", self.local_block,
                f"None beside local_window={self.local_window}: aligned blocks and a sliding window are two exact "
                "local parts, choose one and set the other to None (local_block for the chunked reader, local_window "
                "for a sliding window)")
        if self.local_block is not None and max_length:
            require(self.local_block <= max_length, "local_block", self.local_block,
                    f"at most the model's maximum length {max_length} (a block of the whole input is full softmax "
                    "attention: use attention_type='sdpa')")
        local = self.local_window is not None or self.local_block is not None
        require(self.global_tokens == 0 or local, "global_tokens", self.global_tokens,
                "0 without a local part (global tokens are exact attention beside it): set local_window or local_block")
        require(self.local_block is None or self.global_tokens <= self.local_block, "global_tokens",
                self.global_tokens,
                f"at most local_block={self.local_block} (the global tokens lie in the first block)")
        require(not max_length or self.global_tokens <= max_length, "global_tokens", self.global_tokens,
                f"at most the model's maximum length {max_length}")
        require(self.local_window_every == 1 or self.local_window is not None, "local_window_every",
                self.local_window_every, "1 without a local window (it chooses the layers that get one; blocks are in "
                "every layer): set local_window too")
        require(self.initial_mechanism_weight is None or local, "initial_mechanism_weight",
                self.initial_mechanism_weight, "None without a local part (it weighs the mechanism beside a window or "
                "blocks): set local_window or local_block")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


HEADS_SPECS = {"hidden_size": Spec(int, minimum=1), "num_attention_heads": Spec(int, minimum=1)}


def check_heads(hidden_size: int, num_heads: int) -> None:
    """Raise unless the width and the head count are positive integers and the heads divide the width."""
    for name, value in zip(HEADS_SPECS, (hidden_size, num_heads)):
        checked(name, value, HEADS_SPECS[name], where="config value")
    if hidden_size % num_heads:
        divisors = [h for h in range(1, hidden_size + 1) if hidden_size % h == 0]
        closest = sorted(sorted(divisors, key=lambda h: abs(h - num_heads))[:3])
        raise ValueError(
            f"hidden_size={hidden_size} is not divisible by num_attention_heads={num_heads}: "
            f"choose a head count that divides the width (the closest: one of {closest})."
        )


def require(condition: bool, setting: str, value: Any, allowed: str) -> None:
    """Raise a ``ValueError`` naming ``setting``, its ``value`` and the ``allowed`` range."""
    if not condition:
        raise ValueError(f"Invalid attention setting {setting}={value!r}: it must be {allowed}.")


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
    # The gate's default initial value sigma(mechanism_logit), the weight of the mechanism's part beside a local window
    # and beside aligned blocks (see the module docstring; the setting initial_mechanism_weight overrides them): the
    # mixed mechanisms' defaults here, the kernelized ones' in ``kernel_attention.py``, both measured on MiniLM
    # (docs/local-window.md, docs/local-blocks.md): beside the blocks, the largest start within 0.01 nats of the
    # chunked reader's masked-LM loss.
    window_mechanism_weight: ClassVar[float | None] = 0.5
    block_mechanism_weight: ClassVar[float | None] = 0.1
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
                               mechanism_weight=self.initial_weight(settings, self.block_mechanism_weight))
        if settings.local_window is None or layer_idx % settings.local_window_every:
            return None
        return LocalWindow(num_heads, settings.local_window, settings.global_tokens,
                           mechanism_weight=self.initial_weight(settings, self.window_mechanism_weight))

    @staticmethod
    def initial_weight(settings: AttentionSettings, default: float | None) -> float | None:
        """The gate's initial value: the setting, else the mechanism's ``default`` (None: no mechanism beside)."""
        return default if default is None or settings.initial_mechanism_weight is None \
            else settings.initial_mechanism_weight

    def project(self, hidden_states: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Queries, keys and values ``[B, h, N, d]`` from ``hidden_states [B, N, C]``."""
        return tuple(self.split_heads(proj(hidden_states)) for proj in (self.query, self.key, self.value))

    def forward(self, hidden_states, padding_mask=None, state=None, output_attentions=False) -> AttentionOutput:
        """See the module docstring. On CUDA, without ``output_attentions``, the layer takes its fast path where
        ``fast_paths.py``'s mode allows: :meth:`exact_forward` compiled (the same function, fused); elsewhere
        :meth:`exact_forward` as written."""
        self.check_length(hidden_states.shape[1])
        name = f"the {self.name!r} attention"
        if not output_attentions and takes_fast_path(name, hidden_states):
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
        mixed = (1 - weight) * window.context + weight * self.split_heads(mechanism.context)
        context = torch.where(window.global_rows[:, None, :, None], window.context, mixed)
        attentions = None
        if output_attentions:
            mixed = (1 - weight) * window.attentions + weight * mechanism.attentions
            attentions = torch.where(window.global_rows[:, None, :, None], window.attentions, mixed)
        return AttentionOutput(self.merge_heads(context), mechanism.state, mechanism.aux_loss, attentions)

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


@dataclass(frozen=True)
class SoftmaxSettings(AttentionSettings):
    """Softmax attention's settings: none of its own, and no local window (it is exact over every token)."""

    def check_window(self, max_length):
        for name in ("local_window", "local_block"):
            require(getattr(self, name) is None, name, getattr(self, name),
                    "None for softmax attention, which is exact over every token already (for a window or blocks "
                    "alone use attention_type='local')")
        super().check_window(max_length)


def log2_ceil(n: int) -> int:
    """``ceil(log2(n))`` for ``n >= 1`` (0 for n = 1)."""
    return max(0, math.ceil(math.log2(n)))
