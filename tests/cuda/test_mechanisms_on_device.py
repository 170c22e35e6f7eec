"""The device lane, mechanisms: every registered mechanism, alone and beside a local window, on batches padded on the
right, on the left, with holes or not at all, in float32 and bfloat16 on the device, in training mode (auxiliary
losses on). Its outputs (context, state, auxiliary loss) and the gradients of its input and parameters equal the
explicit float64 CPU references of tests/helpers/references.py, on the exact path and on the fast path; and the fast
path equals the exact path on the device."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable

import pytest
import torch

from hf_effattn.modeling.fast_paths import fast_paths
from helpers.device_lane import (
    PADDINGS, PATHS, PRECISIONS, Precision, allowed_error, as_float64, assert_close_in_norm, assert_gradients_close,
    cases, copied_to, exact_in_every_precision, flat, local_part, padding_mask, parameter_gradients,
    skip_where_fast_paths_cannot_run,
)
from helpers.mechanisms import build
from helpers.references import reference

# Several query blocks of the 32-token window, and a head width that fused kernels take (16).
LENGTH, HIDDEN, HEADS = 160, 32, 2
# Weights drawn from N(0, 0.1^2): random, and small enough that the functions stay well conditioned in bfloat16.
# (At 0.3, the CPU suite's choice, the explicit formulas themselves evaluated in bfloat16 are up to 1e-1 from
# float64: Kerformer's hybrid's input gradient; here at most 2e-2.)
STD = 0.1
# Beside a window, Performer's features are stabilised per query row, so no explicit reference stands for it
# (tests/mechanisms/test_local_window.py); its float64 CPU module, checked there against its own matrix, does.
WITHOUT_EXPLICIT_REFERENCE = {"performer+window", "performer+blocks"}
CASES = cases()


@dataclass
class Run:
    """One forward and backward on a padded batch, in float64 on the CPU: the outputs (``context`` at the real tokens
    ``[R, C]``, ``state``, ``aux_loss``; None where there is none), the input's gradient at the real tokens
    ``[R, C]`` and at the pads ``[P, C]``, and the parameters' gradients by name."""

    outputs: dict[str, torch.Tensor | None]
    input_gradient: torch.Tensor
    pad_gradient: torch.Tensor
    parameter_gradients: dict[str, torch.Tensor]


@dataclass
class Case:
    """A case: its float64 CPU mechanism (training mode) and batch ``x [3, N, C]``, both exact in every precision,
    ``mask [3, N]`` (True = real), whether the mechanism is given it (``padded``; not for the padding ``"none"``),
    the weights ``[3, N, C]`` of the loss (the weighted sum of the context at the real tokens, plus the auxiliary
    loss) and the reference :class:`Run`."""

    attn: torch.nn.Module
    x: torch.Tensor
    mask: torch.Tensor
    padded: bool
    weights: torch.Tensor
    expected: Run


Forward = Callable[[torch.nn.Module, torch.Tensor, torch.Tensor], tuple]


def module_forward(padded: bool) -> Forward:
    """The mechanism itself: ``(context [B, N, C], state, aux_loss)``, given the padding mask where ``padded``."""

    def forward(attn, x, mask):
        output = attn(x, mask if padded else None)
        return output.context, output.state, output.aux_loss

    return forward


def reference_forward(attn, x, mask) -> tuple:
    """The explicit references, per sequence on its real tokens, as the batch's ``(context, state, aux_loss)``: the
    context at the real tokens (zeros at the pads), the states stacked, the mean of the auxiliary losses."""
    references = reference(attn, x, mask)
    context = torch.zeros_like(x).index_put((mask,), torch.cat([r.context for r in references]))
    state = None if references[0].state is None else torch.stack([r.state for r in references])
    aux_loss = None if references[0].aux_loss is None else torch.stack([r.aux_loss for r in references]).mean()
    return context, state, aux_loss


def run(attn, x: torch.Tensor, mask: torch.Tensor, weights: torch.Tensor, forward: Forward) -> Run:
    """``forward`` and the backward of its loss, on ``attn``'s device and dtype (the loss in ``weights``' dtype)."""
    x = x.detach().requires_grad_()
    attn.zero_grad(set_to_none=True)
    context, state, aux_loss = forward(attn, x, mask)
    loss = (context.to(weights.dtype) * weights)[mask].sum()
    (loss if aux_loss is None else loss + aux_loss).backward()
    outputs = {"context": context[mask], "state": state, "aux_loss": aux_loss}
    assert torch.isfinite(context).all(), "the context is not finite everywhere (pads included)"
    return Run({name: as_float64(value) for name, value in outputs.items()}, as_float64(x.grad[mask]),
               as_float64(x.grad[~mask]), parameter_gradients(attn))


@functools.cache
def case_of(case: str, padding: str) -> Case:
    """The float64 CPU mechanism, batch and reference run of a case and padding (computed once for every precision
    and path)."""
    attn = build(case, local_part(case) or None, hidden=HIDDEN, heads=HEADS, max_length=LENGTH, std=STD).train()
    generator = torch.Generator().manual_seed(1)
    x, weights = (torch.randn(3, LENGTH, HIDDEN, generator=generator, dtype=torch.float64) for _ in range(2))
    attn, x, mask = exact_in_every_precision(attn), exact_in_every_precision(x), padding_mask(padding, LENGTH)
    forward = module_forward(padded=True) if case in WITHOUT_EXPLICIT_REFERENCE else reference_forward
    return Case(attn, x, mask, padding != "none", weights, run(attn, x, mask, weights, forward))


def device_run(case: Case, device: torch.device, precision: Precision, path: str) -> Run:
    """The case's mechanism copied to ``device`` in ``precision``, run on ``path`` (a mode of ``fast_paths``)."""
    attn = copied_to(case.attn, device, precision)
    x, mask = case.x.to(device=device, dtype=precision.dtype), case.mask.to(device)
    with fast_paths(path):
        return run(attn, x, mask, case.weights.to(device=device, dtype=torch.float32), module_forward(case.padded))


@functools.cache
def cpu_run(case: str, padding: str, dtype: str) -> Run:
    """The case on the CPU's exact path in ``dtype``: how close to float64 the function can be computed in it
    (:func:`~helpers.device_lane.allowed_error`)."""
    return device_run(case_of(case, padding), torch.device("cpu"), PRECISIONS[dtype], "exact")


def allowances(case: str, padding: str, dtype: str) -> dict[str, float]:
    """How far from the float64 reference each output and gradient may be in ``dtype``
    (:func:`~helpers.device_lane.allowed_error`, measured from the CPU's exact path in that dtype)."""
    expected, on_cpu, precision = case_of(case, padding).expected, cpu_run(case, padding, dtype), PRECISIONS[dtype]
    allowed = {name: allowed_error(precision, value, on_cpu.outputs[name]) for name, value in expected.outputs.items()}
    allowed["input"] = allowed_error(precision, expected.input_gradient, on_cpu.input_gradient)
    allowed["parameters"] = allowed_error(precision, flat(expected.parameter_gradients),
                                          flat(on_cpu.parameter_gradients))
    return allowed


def assert_runs_close(actual: Run, expected: Run, allowed: dict[str, float], what: str) -> None:
    """``actual``'s outputs and gradients within ``allowed`` (:func:`allowances`) of ``expected``'s; the pads' gradient
    zero."""
    for name, value in actual.outputs.items():
        assert_close_in_norm(value, expected.outputs[name], allowed[name], f"{name}, {what}")
    assert_close_in_norm(actual.input_gradient, expected.input_gradient, allowed["input"], f"input gradient, {what}")
    assert_gradients_close(actual.parameter_gradients, expected.parameter_gradients, allowed["parameters"],
                           f"parameter gradients, {what}")
    assert torch.all(actual.pad_gradient == 0), f"pads got a gradient, {what}"


@pytest.mark.parametrize("padding", PADDINGS)
@pytest.mark.parametrize("case", CASES)
def test_outputs_and_gradients_equal_the_float64_reference(case, padding, dtype, path, device):
    expected = case_of(case, padding)
    actual = device_run(expected, device, PRECISIONS[dtype], path)
    assert_runs_close(actual, expected.expected, allowances(case, padding, dtype),
                      f"{case} on the {path} path in {dtype}, padding {padding}, against float64 on the CPU")


@pytest.mark.parametrize("padding", PADDINGS)
@pytest.mark.parametrize("case", CASES)
def test_the_fast_path_equals_the_exact_path(case, padding, dtype, device):
    """Within what the dtype allows of the float64 reference."""
    skip_where_fast_paths_cannot_run("fast", device, PRECISIONS[dtype])
    exact, fast = (device_run(case_of(case, padding), device, PRECISIONS[dtype], path) for path in PATHS)
    assert_runs_close(fast, exact, allowances(case, padding, dtype),
                      f"{case} on the fast path against the exact path, both in {dtype} on {device}, "
                      f"padding {padding}")
