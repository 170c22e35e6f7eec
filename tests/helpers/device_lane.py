"""What the device lane (``tests/cuda``, on the device of ``--device``) shares: the precisions it runs in and their
tolerances, its cases (every registered mechanism, alone and beside a window), padding masks, float64 CPU modules
copied to the device, and comparisons by relative norm whose failures say what differs and by how much."""

from __future__ import annotations

import copy
from dataclasses import dataclass

import pytest
import torch
from torch import nn

import hf_effattn
from hf_effattn.modeling.fast_paths import obstacle


@dataclass(frozen=True)
class Precision:
    """A dtype the lane runs in (the module and its inputs cast to it, as ``model.to(dtype)``), and how far its
    results may be from float64's: ``||actual - expected|| / ||expected||``."""

    dtype: torch.dtype
    tolerance: float


# bfloat16 rounds each result by up to 4e-3 (8 significant bits); over a layer's operations the lane's results on a
# CPU end up to 2e-2 from float64 (where the conditioning allows more, see allowed_error).
PRECISIONS = {"float32": Precision(torch.float32, 1e-5), "bfloat16": Precision(torch.bfloat16, 2e-2)}
PADDINGS = ("none", "right", "left", "holes")  # "none": no padding mask at all (the unpadded paths)
PATHS = ("exact", "fast")  # the modes of fast_paths compared
# The local parts beside which the mechanisms that take one run (as "<name>+<part>"; "local" alone is the window
# alone), one setting each for the whole lane, so that each mechanism's fast path compiles once per dtype and mask:
# the window beside every mechanism, the aligned blocks beside the four seeds', one kernelized baseline, and alone,
# and the kernelized ones' memory under the blocks' normaliser ("shared-blocks"; gated by default).
LOCAL_PARTS = {"window": {"local_window": 32, "global_tokens": 1},
               "blocks": {"local_block": 24, "global_tokens": 1}}
LOCAL_PARTS["shared-blocks"] = {**LOCAL_PARTS["blocks"], "shared_normaliser": True}
BESIDE_BLOCKS = ("local", "singularformer", "kerformer", "dba", "psf", "linear")
SHARING_BLOCKS = ("kerformer", "linear")


def cases() -> list[str]:
    """Every registered mechanism alone (``local``: the window alone), then each that takes a local part beside
    the window, :data:`BESIDE_BLOCKS` beside the blocks and :data:`SHARING_BLOCKS` under their normaliser, as
    ``<name>+<part>``."""
    names = hf_effattn.list_attentions()
    windowed = [f"{name}+window" for name in names
                if hf_effattn.describe_attention(name)["local_part_role"] in ("mixed", "kernel")]
    return (names + windowed + [f"{name}+blocks" for name in BESIDE_BLOCKS]
            + [f"{name}+shared-blocks" for name in SHARING_BLOCKS])


def local_part(case: str) -> dict:
    """The settings of a case's local part (``local`` alone: the window's), none for a mechanism alone."""
    name, _, part = case.partition("+")
    return LOCAL_PARTS[part or "window"] if name == "local" or part else {}


def real_lengths(padding: str, length: int) -> list[int]:
    """The real tokens of the lane's three sequences in ``length``: all full without padding, else one full and two
    shorter ones."""
    return [length] * 3 if padding == "none" else [length, 5 * length // 8, length // 4]


def padding_mask(padding: str, length: int, seed: int = 0) -> torch.Tensor:
    """``[3, N]`` bool, True at real tokens (:func:`real_lengths`): pads at the ``"right"``, at the ``"left"``, or
    ``"holes"``: each sequence's real tokens at random places, pads between them; all True for ``"none"``."""
    generator = torch.Generator().manual_seed(seed)
    mask = torch.zeros(3, length, dtype=torch.bool)
    for b, real in enumerate(real_lengths(padding, length)):
        if padding == "holes":
            mask[b, torch.randperm(length, generator=generator)[:real]] = True
        elif padding == "left":
            mask[b, length - real :] = True
        else:
            mask[b, :real] = True
    return mask


def skip_where_fast_paths_cannot_run(path: str, device: torch.device, precision: Precision) -> None:
    """Skip a test of the fast path where none can run (on a CPU: the fast paths are for CUDA)."""
    reason = obstacle(torch.empty(0, device=device, dtype=precision.dtype)) if path == "fast" else None
    if reason:
        pytest.skip(f"no fast path runs here: {reason}")


def exact_in_every_precision(values):
    """A module or tensor rounded to bfloat16, in float64: values that float32 and bfloat16 hold exactly, so that a
    float64 reference on them differs from the device's run in any precision only by the arithmetic."""
    return values.to(torch.bfloat16).double()


def copied_to(module: nn.Module, device: torch.device, precision: Precision) -> nn.Module:
    """A copy of ``module`` (a float64 CPU reference) on ``device`` in ``precision``'s dtype, in the same mode."""
    return copy.deepcopy(module).to(device=device, dtype=precision.dtype)


def as_float64(tensor: torch.Tensor | None) -> torch.Tensor | None:
    return None if tensor is None else tensor.detach().to("cpu", torch.float64)


def relative_error(actual: torch.Tensor, expected: torch.Tensor) -> float:
    """``||actual - expected|| / ||expected||`` in float64 (0 where both are 0)."""
    difference = (as_float64(actual) - as_float64(expected)).norm().item()
    return difference / expected.norm().item() if difference else 0.0


def allowed_error(precision: Precision, expected: torch.Tensor | None, on_cpu: torch.Tensor | None) -> float:
    """How far from ``expected`` (float64) a result in ``precision`` may be: the precision's tolerance, or twice as far
    as ``on_cpu`` (the same computation on the CPU's exact path in the same precision) where the function's
    conditioning makes that larger (a normaliser near zero amplifies bfloat16's rounding, on every device alike)."""
    if expected is None or on_cpu is None:
        return precision.tolerance
    return max(precision.tolerance, 2 * relative_error(on_cpu, expected))


def assert_close_in_norm(actual: torch.Tensor | None, expected: torch.Tensor | None, allowed: float,
                         what: str) -> None:
    """``actual`` is finite and within ``allowed`` of ``expected`` in relative norm (or both are None)."""
    assert (actual is None) == (expected is None), f"{what}: {actual is None=} but {expected is None=}"
    if expected is None:
        return
    assert actual.shape == expected.shape, f"{what}: shape {list(actual.shape)} != {list(expected.shape)}"
    assert torch.isfinite(actual).all(), f"{what}: not finite ({(~torch.isfinite(actual)).sum()} values)"
    error = relative_error(actual, expected)
    assert error <= allowed, f"{what}: relative error {error:.1e} > {allowed:.1e} allowed (||actual - expected|| / " \
                             "||expected||)"


def flat(gradients: dict[str, torch.Tensor]) -> torch.Tensor:
    """The parameters' gradients as one float64 vector, in the order of their names."""
    return torch.cat([as_float64(gradients[name]).flatten() for name in sorted(gradients)])


def assert_gradients_close(actual: dict[str, torch.Tensor], expected: dict[str, torch.Tensor], allowed: float,
                           what: str) -> None:
    """The parameters' gradients (by name) finite and, all together, within ``allowed`` of ``expected`` in relative
    norm; a failure names the parameters that differ most."""
    assert actual.keys() == expected.keys(), f"{what}: parameters {sorted(actual)} != {sorted(expected)}"
    for name, gradient in actual.items():
        assert torch.isfinite(gradient).all(), f"{what}: the gradient of {name} is not finite"
    error = relative_error(flat(actual), flat(expected))
    worst = sorted(expected, key=lambda name: -relative_error(actual[name], expected[name]))[:3]
    assert error <= allowed, f"{what}: relative error {error:.1e} > {allowed:.1e} allowed over all parameters; " \
        "most in " + ", ".join(f"{name} ({relative_error(actual[name], expected[name]):.1e})" for name in worst)


def parameter_gradients(module: nn.Module) -> dict[str, torch.Tensor]:
    """Every parameter's gradient by name, in float64 on the CPU; zeros for a parameter the loss did not reach."""
    return {name: as_float64(torch.zeros_like(parameter) if parameter.grad is None else parameter.grad)
            for name, parameter in module.named_parameters()}
