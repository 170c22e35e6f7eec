"""Declared settings: each setting's type and allowed range stated once, next to its default, and one generic check.

A :class:`Spec` says what a value must be: its kind (``bool``, ``int``, ``float`` or ``str``), its bounds
(``minimum``/``maximum`` inclusive, ``above``/``below`` exclusive) or choices, and whether ``None`` is allowed (and
what it then means). :func:`checked` applies it, converting the value to the kind:

* ``bool``: a real bool, True or False; not ``"false"``, not ``0`` or ``1``.
* ``int``: an integer, not a bool (numpy integers are converted to ``int``).
* ``float``: a finite real number, not a bool; integers are accepted and converted (JSON writes ``0.0`` as ``0``).
* ``str``: a string, one of ``choices`` when given.

A value of the wrong kind raises a ``TypeError``, one out of range (or not finite) a ``ValueError``; either
message names the setting, the value, what is expected, and the default when there is one. :func:`require` raises
such a ``ValueError`` for a constraint that involves other values or the model's shape.

Settings dataclasses (a mechanism's, ``attention_settings.AttentionSettings``; the local part's,
``local_settings.LocalPartSettings``) extend :class:`DeclaredSettings` and declare their fields with :func:`setting`;
the model configs declare the config values they rely on as a dict of specs (see ``configuration_effattn``).
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from dataclasses import dataclass
from typing import Any

NO_DEFAULT = object()


@dataclass(frozen=True)
class Spec:
    """A value's kind, bounds and ``choices``; ``none_means``: what an allowed ``None`` means."""

    kind: type
    minimum: float | None = None
    above: float | None = None
    below: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] | None = None
    none_means: str | None = None

    def describe(self) -> str:
        """In words, e.g. ``"a positive integer"``."""
        kind = {
            bool: "a bool, True or False (true or false in JSON; not a string or a number)",
            int: "an integer",
            float: "a finite number",
            str: "a string",
        }[self.kind]
        if self.choices is not None:
            kind = f"one of {', '.join(map(repr, self.choices))}"
        minimum = self.minimum
        if self.kind is int and minimum in (0, 1) and self.maximum is None:
            kind, minimum = ("a positive integer" if minimum else "a non-negative integer"), None
        bounds = [f">= {minimum}"] if minimum is not None else []
        bounds += [f"> {self.above}"] if self.above is not None else []
        bounds += [f"< {self.below}"] if self.below is not None else []
        bounds += [f"<= {self.maximum}"] if self.maximum is not None else []
        if self.minimum is not None and self.maximum is not None:
            bounds = [f"in [{self.minimum}, {self.maximum}]"]
        none = f", or None for {self.none_means}" if self.none_means is not None else ""
        return " ".join([kind, " and ".join(bounds)]).strip() + none

    def of_kind(self, value: Any) -> bool:
        """Whether ``value`` has the kind; ints pass as floats, bools only as bools."""
        if isinstance(value, bool) or self.kind is bool:
            return isinstance(value, bool) and self.kind is bool
        numeric = {int: numbers.Integral, float: numbers.Real}
        return isinstance(value, numeric.get(self.kind, self.kind))

    def in_range(self, value: Any) -> bool:
        """Whether a value of the kind is finite, in bounds and ``choices``."""
        if self.kind is float and not math.isfinite(value):
            return False
        return not (
            (self.minimum is not None and value < self.minimum)
            or (self.above is not None and value <= self.above)
            or (self.below is not None and value >= self.below)
            or (self.maximum is not None and value > self.maximum)
            or (self.choices is not None and value not in self.choices)
        )


def checked(name: str, value: Any, spec: Spec, where: str = "attention setting", default: Any = NO_DEFAULT,
            fix: str = "") -> Any:
    """``value`` as the spec's kind; ``TypeError`` or ``ValueError`` if it does not fit."""
    if value is None and spec.none_means is not None:
        return None
    fits_kind = spec.of_kind(value)
    if fits_kind and spec.in_range(value):
        return spec.kind(value) if spec.kind in (int, float) else value
    kind = "" if fits_kind else f" ({type(value).__name__})"
    hint = "" if default is NO_DEFAULT else f" (default: {default!r})"
    message = f"Invalid {where} {name}={value!r}{kind}: it must be {spec.describe()}{hint}{fix}."
    raise (ValueError if fits_kind else TypeError)(message)


def setting(default: Any, kind: type, **limits: Any) -> dataclasses.Field:
    """A dataclass field whose value must fit ``Spec(kind, **limits)``."""
    return dataclasses.field(default=default, metadata={"spec": Spec(kind, **limits)})


@dataclass(frozen=True)
class DeclaredSettings:
    """A frozen dataclass of :func:`setting` fields, checked when built."""

    def __post_init__(self):
        for field in dataclasses.fields(self):
            if "spec" not in field.metadata:
                raise TypeError(
                    f"{type(self).__name__}.{field.name} has no declared type and range: declare it with "
                    "setting(default, kind, ...)."
                )
            value = checked(field.name, getattr(self, field.name), field.metadata["spec"], default=field.default)
            object.__setattr__(self, field.name, value)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def require(condition: bool, setting: str, value: Any, allowed: str) -> None:
    """Unless ``condition``, a ``ValueError``: ``setting=value`` must be ``allowed``."""
    if not condition:
        raise ValueError(f"Invalid attention setting {setting}={value!r}: it must be {allowed}.")
