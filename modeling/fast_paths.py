"""Which implementation runs: one exact path everywhere, and fast paths on CUDA (and PSF's on a CPU).

Every mechanism has one *exact path*, written with PyTorch operations: it runs on any device, exports to ONNX,
compiles with ``torch.compile``, and is what the tests compare with the papers' explicit references. On a CUDA
device each attention layer also has a *fast path*: the same function, its chains of small operations (feature
maps, summaries, masks, the gate's mixing) fused into a few kernels by ``torch.compile`` (Triton, dynamic shapes:
compiled at the first call, for every length), the matrix products and the block softmax left to cuBLAS and the
flash kernel (``attention_base.EfficientAttention.forward``); a mechanism with kernels of its own (``has_own_kernels``:
PSF's, ``chord_kernels.py``) runs those instead, uncompiled. PSF also has a fast path on a CPU: each factor's product
compiled by ``torch.compile`` (inductor's C++, ``chord_mixes.plain_chord_mix``), which needs a C++ compiler; its
first call compiles for about a minute. The mode chooses, for the whole process:

* ``"exact"`` (the default): the exact path everywhere (and the reference the fast paths are tested against). On
  CUDA a mechanism with kernels of its own (PSF) says once, where the user has not chosen the mode, how to run them.
* ``"auto"``: the fast path where it can run (CUDA tensors and Triton, or PSF's on CPU tensors; not while exporting
  or tracing), else the exact path. Where a fast path cannot run on CUDA, or fails to compile, one log line says why,
  once, and the exact path runs.
* ``"fast"``: the fast path, and a ``RuntimeError`` naming what stops it where it cannot run.

Why not ``"auto"`` by default: on an H200 (PyTorch 2.11) the first call of Singularformer's layer did not finish
compiling its fast path within 110 s, so a run would start minutes late for a gain not yet measured
(docs/results.md, 2026-11-27); the exact path, eager, is what the GPU tables time.

::

    from hf_effattn.modeling.fast_paths import fast_paths

    with fast_paths("auto"):
        outputs = model(**batch)

``HF_EFFATTN_FAST_PATHS=auto`` (or ``fast``; any case, empty for the default) in the environment sets the starting
mode. It is read where the mode is first used (a model's first call, a script's check before it loads anything), not at
import: a bad value stops only what needs the mode, with one line naming the variable, the value and the choices.
Under an outer ``torch.compile(model)`` the exact path is what gets compiled: the outer compiler fuses it the same way.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Callable

import torch
from transformers.utils import logging

from .masking import capturing_graph

logger = logging.get_logger(__name__)

MODES = ("auto", "exact", "fast")
DEFAULT = "exact"
ENVIRONMENT_VARIABLE = "HF_EFFATTN_FAST_PATHS"
AUTO_FIX = (f"Set {ENVIRONMENT_VARIABLE}=auto (or unset it; in Python, fast_paths('auto')) to take the exact path "
            "where a fast path cannot run")


def checked_mode(mode: str, where: str = "fast_paths") -> str:
    if mode not in MODES:
        raise ValueError(f"{where}={mode!r}: choose one of {', '.join(MODES)} ('auto' takes the fast paths on CUDA "
                         f"where they can run; unset for the default, {DEFAULT!r}).")
    return mode


def environment_mode() -> tuple[str, bool]:
    """The mode ``HF_EFFATTN_FAST_PATHS`` sets (any case; unset or empty: the default), checked, and whether the user
    chose it there."""
    value = os.environ.get(ENVIRONMENT_VARIABLE, "")
    mode = value.strip().lower()
    if not mode:
        return DEFAULT, False
    return checked_mode(mode if mode in MODES else value, ENVIRONMENT_VARIABLE), True


_mode: str | None = None  # None until first used: then the environment's (fast_path_mode)
_chosen = False  # whether the user chose the mode (then no hint to change it)
_said: set[str] = set()


def fast_path_mode() -> str:
    """The current mode: ``"auto"``, ``"exact"`` or ``"fast"`` (module docstring); at its first use, the one
    ``HF_EFFATTN_FAST_PATHS`` sets (a ``ValueError`` for a value that is not a mode, raised again at every use)."""
    global _mode, _chosen
    if _mode is None:
        _mode, chosen = environment_mode()
        _chosen = _chosen or chosen
    return _mode


def set_fast_paths(mode: str) -> None:
    """Set the mode for the whole process (module docstring)."""
    global _mode, _chosen
    _mode, _chosen = checked_mode(mode), True


@contextmanager
def fast_paths(mode: str):
    """Within the block, the mode is ``mode``; the previous one afterwards (the environment's, read at its first use,
    where the mode was not used before the block)."""
    global _mode
    previous = _mode
    set_fast_paths(mode)
    try:
        yield
    finally:
        _mode = previous


def obstacle(tensor: torch.Tensor, devices: tuple[str, ...] = ("cuda",)) -> str | None:
    """Why no fast path for the device types ``devices`` can run on ``tensor``'s device now, or None where one can
    (on CUDA it needs Triton; on a CPU ``torch.compile`` needs a C++ compiler, which only compiling can tell)."""
    if tensor.device.type not in devices:
        return f"the tensors are on {tensor.device.type}, this fast path is for {' and '.join(devices)}"
    if tensor.device.type != "cuda":
        return None
    if tensor.dtype not in (torch.float32, torch.bfloat16, torch.float16):
        return f"{tensor.dtype} is not one of float32, bfloat16, float16"
    try:
        from torch.utils._triton import has_triton
    except ImportError:  # a PyTorch without the helper has no Triton either
        return "this PyTorch has no Triton"
    return None if has_triton() else "Triton is not installed"


def fast_path_devices(attention_class) -> tuple[str, ...]:
    """The device types where a mechanism has a fast path: CUDA for every one, and those of its own mixes
    (``fast_mixes``: PSF's factor product, compiled on a CPU too)."""
    return tuple(dict.fromkeys(("cuda", *getattr(attention_class, "fast_mixes", {}))))


def check_fast_paths_can_run(device: torch.device | str, devices: tuple[str, ...] = ("cuda",)) -> None:
    """A ``ValueError`` naming the fix where no fast path for the device types ``devices`` can run on ``device``: in
    ``"fast"`` mode, checked where a run has chosen its device, before it loads or reads anything."""
    reason = obstacle(torch.empty(0, device=device), devices)
    if reason is not None:
        raise ValueError(f"The fast paths are required ({ENVIRONMENT_VARIABLE}=fast, or fast_paths('fast')), but none "
                         f"can run here: {reason}. {AUTO_FIX}.")


def takes_fast_path(name: str, tensor: torch.Tensor, devices: tuple[str, ...] = ("cuda",), own_kernels: bool = False
                    ) -> bool:
    """Whether the part ``name``, which has a fast path for the device types ``devices``, runs it on ``tensor`` (an
    input of it) in the current mode; in ``"fast"`` mode, a ``RuntimeError`` where it cannot run; in ``"auto"`` mode,
    one log line per reason. ``own_kernels``: the fast path on CUDA is the part's own kernels, which compile in
    seconds (not ``torch.compile``'s minutes): on CUDA in the default mode, not one the user chose, one log line says
    how to turn them on."""
    mode = fast_path_mode()
    if mode == "exact":
        if own_kernels and not _chosen and tensor.device.type == "cuda" and name not in _said and not capturing_graph():
            _said.add(name)
            logger.warning("hf_effattn: %s runs its exact path on CUDA (the default), several times slower than its "
                           "own kernels: set %s=auto (or fast_paths('auto')) to run them, or =exact to keep the exact "
                           "path without this line.", name, ENVIRONMENT_VARIABLE)
        return False
    if capturing_graph():  # the exact path is what a compiled, exported or traced graph holds
        return False
    reason = obstacle(tensor, devices)
    if reason is None:
        return True
    if mode == "fast":
        raise RuntimeError(f"The fast path of {name} cannot run: {reason}. {AUTO_FIX}.")
    if tensor.device.type == "cuda" and reason not in _said:
        _said.add(reason)
        logger.warning("hf_effattn fast paths off, the exact path runs instead: %s.", reason)
    return False


def run_fast(name: str, function: Callable, *args, kernels: Callable | None = None):
    """The fast path of part ``name``: ``function(*args)`` compiled (:func:`compiled`), or ``kernels(*args)``, a
    mechanism's own kernels doing what ``function`` does. Where it fails to compile, in ``"auto"`` mode one log line
    says why and ``function`` runs as written, now and at every later call (a user's error raises again there, as it
    would have); in ``"fast"`` mode the error is raised."""
    if function not in _failed:
        try:
            return (kernels or compiled(function))(*args)
        except Exception as error:  # noqa: BLE001 - any compiler error: the exact path decides what is an error
            if fast_path_mode() == "fast":
                raise
            _failed.add(function)
            logger.warning("hf_effattn: the fast path of %s did not compile (%s: %s); the exact path runs instead.",
                           name, type(error).__name__, str(error).splitlines()[0] if str(error) else "")
    return function(*args)


def compiled(function: Callable) -> Callable:
    """``torch.compile(function)`` with dynamic shapes (one compilation for every input length and batch), made
    once per function and kept; it compiles anew for a new guard (another dtype, a padding mask or none)."""
    if function not in _compiled:
        logger.info("hf_effattn: compiling the fast path of %s.", function.__qualname__)
        _compiled[function] = torch.compile(function, fullgraph=True, dynamic=True)
    return _compiled[function]


_compiled: dict[Callable, Callable] = {}
_failed: set[Callable] = set()
