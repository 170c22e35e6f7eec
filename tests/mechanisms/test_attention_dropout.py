"""Attention dropout (``attention_probs_dropout_prob``): every mechanism honours it in training, at the place its
docstring names, and ignores it in evaluation. The kernelized mechanisms and PSF, whose attention matrix is never
built, are checked against their dense references with the very mask the module drew."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import hf_effattn
from helpers.mechanisms import MECHANISMS, build, mixed_batch
from helpers.models import text_config
from helpers.references import REFERENCES, merge, projections, psf_reference
from helpers.tolerances import assert_float64_close


class RecordingDropout(nn.Dropout):
    """``nn.Dropout(p)`` drawing from its own seeded generator, keeping the multiplier it applied (0 or 1 / (1 - p))."""

    def __init__(self, p: float = 0.5, seed: int = 0):
        super().__init__(p)
        self.generator = torch.Generator().manual_seed(seed)
        self.multiplier = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        keep = torch.rand(x.shape, generator=self.generator, dtype=x.dtype) >= self.p
        self.multiplier = keep.to(x.dtype) / (1 - self.p)
        return x * self.multiplier


def context(attn: nn.Module, x: torch.Tensor, mask: torch.Tensor, p: float, train: bool, seed: int = 0):
    """The mechanism's context ``[B, N, C]`` with attention dropout ``p``, in train or eval mode."""
    attn.dropout.p = p
    attn.train(train)
    torch.manual_seed(seed)
    return attn(x, mask).context


@pytest.mark.parametrize("name", MECHANISMS)
def test_dropout_is_honoured_in_training_and_ignored_in_eval(name):
    attn = build(name)
    x, mask = mixed_batch()
    plain = context(attn, x, mask, 0.0, train=False)
    assert torch.equal(context(attn, x, mask, 0.5, train=False), plain)
    torch.testing.assert_close(context(attn, x, mask, 0.0, train=True), plain)
    dropped = context(attn, x, mask, 0.5, train=True)
    assert not torch.allclose(dropped[mask], plain[mask]), f"{name} ignores attention_probs_dropout_prob"


@pytest.mark.parametrize("name", MECHANISMS)
def test_config_passes_dropout_to_every_mechanism(name):
    model = hf_effattn.EffAttnRobertaModel(text_config(name, attention_probs_dropout_prob=0.25))
    assert {layer.attention.self.dropout.p for layer in model.encoder.layer} == {0.25}


@pytest.mark.parametrize("summary_chunk", [512, 4], ids=["one-product", "chunks-of-4"])
@pytest.mark.parametrize("name", ["kerformer", "linear", "performer", "cosformer"])
def test_kernelized_mechanisms_drop_whole_key_columns_of_the_attention_matrix(name, summary_chunk):
    """Whether the summary over every key is one product or a sum of products over chunks of 4 of the 10 tokens
    (``summary_chunk``): the mask drops keys from the summary and not from the normaliser in both."""
    attn = build(name).train()
    attn.summary_chunk = summary_chunk
    attn.dropout = RecordingDropout()
    x, mask = mixed_batch()
    out = attn(x, mask).context
    columns = attn.dropout.multiplier[..., 0]  # [B, h, N]: one draw per key token
    for b in range(x.shape[0]):
        real = x[b][mask[b]]
        dropped = REFERENCES[name](attn, real).attention * columns[b][:, None, mask[b]]
        assert_float64_close(out[b][mask[b]], merge(dropped @ projections(attn, real)[2]))


def test_psf_drops_the_entries_of_every_factor():
    attn = build("psf").train()
    attn.dropout = RecordingDropout()
    x, mask = mixed_batch()
    out = attn(x, mask).context
    factor_masks = attn.dropout.multiplier  # [M, B, N, K]
    for b in range(x.shape[0]):
        expected = psf_reference(attn, x[b][mask[b]], factor_masks=factor_masks[:, b][:, mask[b]]).context
        assert_float64_close(out[b][mask[b]], expected)
