"""Mixed precision: under CPU autocast every mechanism stays finite and close to float32; PSF keeps its
product of factors in float32."""

from __future__ import annotations

import pytest
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_leaves

from helpers.mechanisms import MECHANISMS, build, mixed_batch


def relative_error(actual: torch.Tensor, expected: torch.Tensor) -> float:
    """``||actual - expected|| / ||expected||`` (norm-wise, in float32)."""
    return ((actual.float() - expected).norm() / expected.norm()).item()


@pytest.mark.parametrize("name", MECHANISMS)
def test_bfloat16_autocast_is_finite_and_close_to_float32(name):
    attn = build(name, dtype=torch.float32)
    x, mask = mixed_batch(dtype=torch.float32)
    expected = attn(x, mask).context[mask]
    x.requires_grad_()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        actual = attn(x, mask).context[mask]
    assert torch.isfinite(actual).all()
    assert relative_error(actual, expected) <= 2e-2
    actual.float().square().sum().backward()
    assert torch.isfinite(x.grad).all()


class DtypesByAutocast(TorchFunctionMode):
    """Records the dtype of every floating-point result of a torch call, keyed by whether CPU autocast
    was on for that call (a function mode runs above the autocast dispatch, so it sees the flag)."""

    def __init__(self):
        super().__init__()
        self.dtypes = {True: [], False: []}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        autocast = torch.is_autocast_enabled("cpu")
        out = func(*args, **(kwargs or {}))
        for tensor in tree_leaves(out):
            if isinstance(tensor, torch.Tensor) and tensor.is_floating_point():
                self.dtypes[autocast].append(tensor.dtype)
        return out


def test_psf_factor_products_run_in_float32_under_bfloat16_autocast():
    """Autocast runs the factor MLPs in bfloat16; the product of factors runs with autocast off, and
    every floating-point op there (at least one per factor) gives float32."""
    attn = build("psf", dtype=torch.float32)
    x, mask = mixed_batch(dtype=torch.float32)
    with torch.autocast("cpu", dtype=torch.bfloat16), DtypesByAutocast() as recorder:
        attn(x, mask)
    assert torch.bfloat16 in recorder.dtypes[True]
    assert len(recorder.dtypes[False]) >= attn.num_factors
    assert set(recorder.dtypes[False]) == {torch.float32}


def test_psf_product_that_overflows_half_precision_stays_finite():
    """Factors ``1e3 I`` (applied first) then ``1e-3 I``: the exact output is ``V``, but the running
    product reaches ``1e6 V``, beyond float16's 65504. (bfloat16 has float32's exponent range, so half
    precision's overflow is shown with float16; the same float32 path serves both.)"""
    attn = build("psf", {"num_factors": 4}, dtype=torch.float32)
    gains = torch.tensor([1e-3, 1e-3, 1e3, 1e3])
    with torch.no_grad():
        attn.factor_in_weight.zero_()
        attn.factor_out_weight.zero_()
        attn.factor_out_bias.zero_()
        attn.factor_out_bias[:, 0, 0] = gains  # self-link weight of each factor
    x, mask = mixed_batch(dtype=torch.float32)
    expected = attn.value(x)[mask]
    with torch.autocast("cpu", dtype=torch.float16):
        actual = attn(x, mask).context[mask]
    assert actual.dtype == torch.float16 and torch.isfinite(actual).all()
    assert relative_error(actual, expected) <= 2e-2
