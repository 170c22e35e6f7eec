"""Linear memory, structurally: the largest tensor any op creates in forward + backward grows linearly
with the length and never reaches ``B * h * N * N`` elements; eager attention proves the detector works."""

from __future__ import annotations

import pytest
import torch
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
