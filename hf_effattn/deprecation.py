"""Old import paths that keep working for one release, with a ``DeprecationWarning`` that names the new one.

A module that moved leaves a module at its old path that re-exports it and calls :func:`warn_moved` once, when it is
imported; names that moved out of a module that stays are served by :func:`moved_names` (the module's
``__getattr__``), with a warning at each use.
"""

from __future__ import annotations

import importlib
import warnings


def warn_moved(old: str, new: str) -> None:
    """Warn that ``old`` (a module or a name) is deprecated, and that ``new`` replaces it."""
    warnings.warn(f"{old} is deprecated and will be removed in the next release: use {new} instead.",
                  DeprecationWarning, stacklevel=3)


def moved_names(module: str, moved: dict[str, str]):
    """A module ``__getattr__`` for the names of ``module`` that moved: ``moved`` maps each to its new module."""

    def __getattr__(name: str):
        if name not in moved:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        warn_moved(f"{module}.{name}", f"{moved[name]}.{name}")
        return getattr(importlib.import_module(moved[name]), name)

    return __getattr__
