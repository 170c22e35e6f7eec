"""Mixed precision: under CPU autocast every mechanism stays finite and close to float32; PSF keeps its
product of factors in float32."""

from __future__ import annotations

import pytest
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_leaves

from helpers.mechanisms import MECHANISMS, build, mixed_batch

import hf_effattn


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


UNBOUNDED_FEATURES = ["linear", "cosformer"]  # kernelized mechanisms whose features grow with their input


@pytest.mark.parametrize("name", [*UNBOUNDED_FEATURES, *(f"{name}+window" for name in UNBOUNDED_FEATURES)])
def test_kernelized_sums_run_in_float32_for_half_precision_inputs(name):
    """Inputs whose summed key features times values pass float16's 65504 (sum_j phi(k_j)^T v_j over N tokens):
    a model in float16 stays finite and close to float32, alone and beside the window (one shared normaliser).
    (Kerformer's features are softmax-normalised, and Performer's exponentials saturate in half precision before
    any sum, at such inputs.)"""
    attn = build(name, dtype=torch.float32)
    x, mask = mixed_batch(dtype=torch.float32)
    x = 40 * x  # features and values of tens, summed over the tokens: past 65504 in float16
    expected = attn(x, mask).context[mask]
    actual = attn.half()(x.half(), mask).context[mask]
    assert actual.dtype == torch.float16 and torch.isfinite(actual).all()
    assert relative_error(actual, expected) <= 2e-2


def test_linear_attention_in_float16_stays_finite_on_1000_tokens_of_the_real_minilm():
    """The case found: ``linear`` on the real all-MiniLM-L6-v2, extended to 1,024 positions, in float16 gave NaN
    at 1,000 tokens; its sums now run in float32."""
    from helpers.models import MINILM
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(MINILM)
    inputs = tokenizer(" ".join(["The kernel schedules tasks across processors and memory nodes."] * 120),
                       return_tensors="pt", truncation=True, max_length=1000)
    assert inputs["input_ids"].shape[1] == 1000
    model = hf_effattn.EffAttnRobertaModel.from_pretrained(MINILM, attention_type="linear",
                                                           max_length=1024).eval()
    with torch.no_grad():
        expected = model(**inputs).last_hidden_state
        actual = model.half()(**inputs).last_hidden_state
    assert actual.dtype == torch.float16 and torch.isfinite(actual).all()
    assert relative_error(actual, expected) <= 1e-2
