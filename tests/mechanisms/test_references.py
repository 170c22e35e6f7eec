"""Faithfulness: every mechanism's fast path equals its explicit O(N^2) reference (tests/helpers/references.py)
at real positions of a padded float64 batch and of one without padding, its ``output_attentions`` matrix
equals the reference matrix, and its gradients pass ``gradcheck`` with and without padding."""

from __future__ import annotations

import pytest
import torch

from hf_effattn.modeling.kernel_attention import KernelAttention
from helpers.mechanisms import build, mixed_batch, random_batch
from helpers.memory import BatchedProducts
from helpers.references import reference
from helpers.tolerances import assert_float64_close

CASES = {
    "singularformer": ("singularformer", {}),
    "singularformer-r3-pool-after": ("singularformer", {"rank": 3, "pool_before_projection": False}),
    "singularformer-no-residual": ("singularformer", {"residual_attention": False}),
    "kerformer-token": ("kerformer", {"se_mode": "token"}),
    "kerformer-channel": ("kerformer", {"se_mode": "channel", "se_reduction": 2}),
    "kerformer-none": ("kerformer", {"se_mode": "none"}),
    "dba": ("dba", {}),
    "dba-small": ("dba", {"compressed_length": 5, "compressed_dim": 6}),
    "psf": ("psf", {}),
    "psf-residual": ("psf", {"residual": True, "num_factors": 3, "num_links": 3, "factor_hidden_size": 7}),
    "eager": ("eager", {}),
    "sdpa": ("sdpa", {}),
    "nystromformer": ("nystromformer", {}),  # m = 64 > L: every token its own landmark
    "nystromformer-4-landmarks": ("nystromformer", {"num_landmarks": 4, "conv_kernel_size": 3}),
    "nystromformer-5-landmarks-no-conv": ("nystromformer", {"num_landmarks": 5, "conv_kernel_size": None,
                                                            "pinv_iterations": 2}),
    "linformer": ("linformer", {}),
    "linformer-separate-kv": ("linformer", {"projected_length": 3, "share_kv": False}),
    "linear": ("linear", {}),
    "performer": ("performer", {}),
    "performer-m5": ("performer", {"num_features": 5, "feature_seed": 3}),
    "cosformer": ("cosformer", {}),
}
STATEFUL = [case for case, (name, _) in CASES.items() if build(name).carries_state]
KERNELIZED = [case for case, (name, _) in CASES.items() if isinstance(build(name), KernelAttention)]


def case(case_id: str, **kwargs):
    """The mechanism of ``CASES[case_id]``."""
    name, settings = CASES[case_id]
    return build(name, settings, **kwargs)


def assert_real_close(actual: torch.Tensor, mask: torch.Tensor, expected: list[torch.Tensor]) -> None:
    """``actual [B, N, ...]`` at the real positions of each sequence equals ``expected[b] [L_b, ...]``."""
    for b, target in enumerate(expected):
        assert_float64_close(actual[b][mask[b]], target)


def stacked(states: list[torch.Tensor | None]) -> torch.Tensor | None:
    """Per-sequence reference states ``[...]`` -> a batched ``[B, ...]`` state (None stays None)."""
    return None if states[0] is None else torch.stack(states)


@pytest.mark.parametrize("case_id", CASES)
def test_fast_path_matches_reference(case_id):
    attn = case(case_id)
    x, mask = mixed_batch()
    out = attn(x, mask)
    refs = reference(attn, x, mask)
    assert_real_close(out.context, mask, [r.context for r in refs])
    expected_state = stacked([r.state for r in refs])
    if expected_state is None:
        assert out.state is None
    else:
        assert_float64_close(out.state, expected_state)


@pytest.mark.parametrize("case_id", CASES)
def test_fast_path_without_padding_matches_reference(case_id):
    """No padding mask: the paths for full batches (PSF's cyclic shifts) match the reference too."""
    attn = case(case_id)
    x, mask = random_batch([10, 10], ["right", "right"], 10)
    assert_real_close(attn(x).context, mask, [r.context for r in reference(attn, x, mask)])


@pytest.mark.parametrize("case_id", KERNELIZED)
def test_summaries_in_chunks_of_tokens_match_reference(case_id):
    """Past ``summary_chunk`` tokens a kernelized mechanism sums its summary over chunks of tokens and reads it out
    chunk by chunk (one product each, as a GPU wants): chunks of 4 of the 10 tokens, the last one short."""
    attn = case(case_id)
    attn.summary_chunk = 4
    x, mask = mixed_batch()
    with BatchedProducts() as products:
        context = attn(x, mask).context
    assert 4 in products.inner and x.shape[1] not in products.inner  # a product over 4 tokens, none over all 10
    assert_real_close(context, mask, [r.context for r in reference(attn, x, mask)])


@pytest.mark.parametrize("case_id", STATEFUL)
def test_second_layer_matches_reference_with_passed_state(case_id):
    first, second = case(case_id), case(case_id, layer_idx=1, seed=1)
    x, mask = mixed_batch()
    state = first(x, mask).state
    out = second(x.flip(-1), mask, state=state)
    refs = reference(second, x.flip(-1), mask, state)
    assert_real_close(out.context, mask, [r.context for r in refs])


@pytest.mark.parametrize("case_id", CASES)
def test_output_attentions_is_the_reference_matrix(case_id):
    attn = case(case_id)
    x, mask = mixed_batch()
    out = attn(x, mask, output_attentions=True)
    for b, ref in enumerate(reference(attn, x, mask)):
        real = mask[b].nonzero().squeeze(-1)
        assert_float64_close(out.attentions[b][:, real][:, :, real], ref.attention)


@pytest.fixture
def one_thread():
    """Run on one intra-op thread: gradcheck makes hundreds of tiny forwards, which threads only slow
    down (much more so on a busy machine)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.parametrize("padded", [True, False], ids=["padded", "unpadded"])
@pytest.mark.parametrize("case_id", CASES)
def test_gradcheck(case_id, padded, one_thread):
    attn = case(case_id, hidden=8, max_length=8).train()  # no dropout: training mode is deterministic
    x, mask = random_batch([4, 2] if padded else [4, 4], ["right", "left"], 4, width=8)
    mask = mask if padded else None

    def outputs(hidden_states):
        out = attn(hidden_states, mask)
        return (out.context,) if out.aux_loss is None else (out.context, out.aux_loss)

    assert torch.autograd.gradcheck(outputs, (x.requires_grad_(),))
