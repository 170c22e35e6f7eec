"""Linear memory, structurally: the largest tensor any op creates in forward + backward grows linearly
with the length and never reaches ``B * h * N * N`` elements; eager attention proves the detector works, and
softmax attention's chunked code path (``max_chunk_scores``) holds no more scores than asked, exactly."""

from __future__ import annotations

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from helpers.mechanisms import build, mixed_batch
from helpers.memory import LargestTensor

import hf_effattn

LENGTH, HIDDEN, HEADS = 512, 16, 2
MAX_GROWTH = {
    "singularformer": 2.2, "kerformer": 2.2, "dba": 2.2, "psf": 2.5,  # PSF: O(N log N)
    "linear": 2.2, "performer": 2.2, "nystromformer": 2.2, "linformer": 2.2, "cosformer": 2.2,
}


def largest_tensor(name: str, length: int) -> int:
    """Largest tensor (elements) in one training step of mechanism ``name`` at ``length``, batch 1, built
    with ``max_length = 2 * length`` so that length-dependent defaults (PSF's M and K) scale as in use."""
    torch.manual_seed(0)
    attn = hf_effattn.build_attention(name, HIDDEN, HEADS, max_length=2 * length).train()
    x = torch.randn(1, length, HIDDEN, requires_grad=True)
    mask = torch.ones(1, length, dtype=torch.bool)
    with LargestTensor() as recorder:
        out = attn(x, mask)
        loss = out.context.square().sum() + (0 if out.aux_loss is None else out.aux_loss)
        loss.backward()
    return recorder.numel


@pytest.mark.parametrize("name", MAX_GROWTH)
def test_memory_grows_linearly_and_never_quadratically(name):
    small, large = largest_tensor(name, LENGTH), largest_tensor(name, 2 * LENGTH)
    assert large / small <= MAX_GROWTH[name], (small, large)
    assert small < HEADS * LENGTH**2 and large < HEADS * (2 * LENGTH) ** 2


def test_detector_sees_the_quadratic_matrix_of_eager():
    assert largest_tensor("eager", LENGTH) >= HEADS * LENGTH**2


@pytest.mark.parametrize("name", ["eager", "sdpa"])
def test_softmax_in_query_chunks_equals_the_whole_and_holds_no_more_scores_than_asked(name):
    """Chunks of 2 queries (of 10, on a padded float64 batch): the same context and gradients as the whole
    softmax, and no tensor as large as the whole's scores ``[B, h, N, N]`` (the largest are the ``[B, h, N, d]``
    projections, d = 8), where the whole holds them (sdpa on its math kernel, which writes the scores out);
    ``output_attentions`` still gives the whole matrix."""
    attention = build(name)
    x, mask = mixed_batch()
    batch, length = mask.shape
    outputs, grads, largest = [], [], []
    for chunk_scores in (None, batch * HEADS * 2 * length):
        attention.max_chunk_scores = chunk_scores
        inputs = x.clone().requires_grad_()
        with sdpa_kernel(SDPBackend.MATH), LargestTensor() as recorder:
            context = attention(inputs, mask).context
        context.square().sum().backward()
        outputs.append(context)
        grads.append(inputs.grad)
        largest.append(recorder.numel)
    torch.testing.assert_close(outputs[1], outputs[0])
    torch.testing.assert_close(grads[1], grads[0])
    assert largest[1] < batch * HEADS * length**2 <= largest[0]
    assert attention(x, mask, output_attentions=True).attentions.shape == (batch, HEADS, length, length)

