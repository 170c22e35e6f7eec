"""The settings of an attention mechanism: :class:`AttentionSettings`, which every mechanism's settings extend with
their own fields.

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
* Only constraints that depend on the model's shape go in :meth:`AttentionSettings.check` (a ratio at most the head
  width, a multiple of the head count, a size that fits ``max_length``), raised with :func:`require`.
* ``local_part_role`` says how the mechanism joins an exact local part (``local_settings.py``), which its settings
  never describe: ``"mixed"`` (its output and the part's mixed per head by a gate), ``"kernel"`` (kernelized: mixed,
  or under the part's normaliser), ``"alone"`` (the part is the whole attention: ``local``) or None (takes none:
  softmax attention, exact over every token already).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .settings import DeclaredSettings, Spec, checked, require, setting  # noqa: F401 - the mechanisms' imports


@dataclass(frozen=True)
class AttentionSettings(DeclaredSettings):
    """Base of a mechanism's settings; ``local_part_role``: how a local part joins it, ``"mixed"`` (gated per head),
    ``"kernel"`` (gated, or under one normaliser), ``"alone"`` (the part is the attention) or None (none)."""

    local_part_role: ClassVar[str | None] = "mixed"

    def check(self, hidden_size: int, num_heads: int, max_length: int | None) -> None:
        """Raise ``ValueError`` where a value does not fit the model's shape."""


HEADS_SPECS = {"hidden_size": Spec(int, minimum=1), "num_attention_heads": Spec(int, minimum=1)}


def check_heads(hidden_size: int, num_heads: int) -> None:
    """Raise unless ``num_heads`` divides ``hidden_size``, both positive integers."""
    for name, value in zip(HEADS_SPECS, (hidden_size, num_heads)):
        checked(name, value, HEADS_SPECS[name], where="config value")
    if hidden_size % num_heads:
        divisors = [h for h in range(1, hidden_size + 1) if hidden_size % h == 0]
        closest = sorted(sorted(divisors, key=lambda h: abs(h - num_heads))[:3])
        raise ValueError(
            f"hidden_size={hidden_size} is not divisible by num_attention_heads={num_heads}: "
            f"choose a head count that divides it (the closest: one of {closest})."
        )
