"""The settings of an attention mechanism: :class:`AttentionSettings`, which every mechanism's settings extend with
their own fields, the local parts' settings they all share, and their checks.

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
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from .settings import Spec, checked, setting


# True while a model is built at its checkpoint's size to be extended at once (``from_pretrained(..., max_length=N)``,
# ``pretrained.py``): the window is checked against the length the model will take, once extended, not this one.
WINDOW_CHECKED_WHEN_EXTENDED = ContextVar("WINDOW_CHECKED_WHEN_EXTENDED", default=False)


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
