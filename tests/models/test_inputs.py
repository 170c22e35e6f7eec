"""The forms of input the models take beyond the plain ones: a 4-D ``attention_mask`` that expresses padding (in
every form Transformers prepares) gives exactly the 2-D mask's outputs and anything else is refused clearly, and an
empty batch gives empty outputs, for every registered mechanism."""

from __future__ import annotations

import pytest
import torch
from transformers.masking_utils import create_bidirectional_mask

import hf_effattn
from helpers.models import pixel_values, text_config, text_inputs, vision_config

INPUTS = text_inputs()  # 3 sequences of 9 tokens: full, right-padded, left-padded
MASK = INPUTS["attention_mask"]
REAL = MASK[:, None, None, :].bool()  # [B, 1, 1, N]


def prepared(attn_implementation: str) -> torch.Tensor:
    """The ``[B, 1, N, N]`` mask that Transformers' encoders prepare from ``MASK`` (bool for sdpa, additive for
    eager)."""
    embeds = torch.zeros(*MASK.shape, 16)
    config = text_config()
    config._attn_implementation = attn_implementation  # the setter of every Transformers 5.x (5.25 ignores the kwarg)
    return create_bidirectional_mask(config, embeds, MASK)  # by position: 5.0 names the embeddings input_embeds


PADDING_FORMS = {
    "bool": REAL,
    "int 0/1": REAL.long(),
    "float 0/1": REAL.float(),
    "additive min": torch.where(REAL, 0.0, torch.finfo(torch.float32).min),
    "additive -10000": (1.0 - REAL.float()) * -10000.0,
    "additive -inf": torch.where(REAL, 0.0, -torch.inf),
    "Transformers sdpa [B,1,N,N]": prepared("sdpa"),
    "Transformers eager [B,1,N,N]": prepared("eager"),
    "pad queries hidden [B,1,N,N]": MASK[:, None, :, None].bool() & REAL,
    "pad queries hidden, float": (MASK[:, None, :, None].bool() & REAL).float(),
}


@pytest.mark.parametrize("name", hf_effattn.list_attentions())
def test_a_4d_padding_mask_gives_the_2d_masks_outputs(name):
    torch.manual_seed(0)
    model = hf_effattn.EffAttnRobertaModel(text_config(name)).eval()
    with torch.no_grad():
        reference = model(**INPUTS, output_hidden_states=True).hidden_states
        for form, mask in PADDING_FORMS.items():
            assert mask.dim() == 4, form
            outputs = model(input_ids=INPUTS["input_ids"], attention_mask=mask, output_hidden_states=True)
            for expected, actual in zip(reference, outputs.hidden_states, strict=True):
                assert torch.equal(actual, expected), form


def test_an_unpadded_additive_mask_means_no_padding():
    """An all-zero float mask is additive (nothing hidden), not 0/1 (everything hidden)."""
    torch.manual_seed(0)
    model = hf_effattn.EffAttnRobertaModel(text_config("kerformer")).eval()
    ids = INPUTS["input_ids"]
    with torch.no_grad():
        reference = model(ids, attention_mask=torch.ones_like(MASK)).last_hidden_state
        assert torch.equal(model(ids, attention_mask=torch.zeros(3, 1, 1, 9)).last_hidden_state, reference)


CAUSAL = torch.ones(3, 1, 9, 9, dtype=torch.bool).tril()


@pytest.mark.parametrize(
    "mask, match",
    [
        (CAUSAL, r"hides different keys from different queries \(a causal or custom mask\).*\[B, N\] padding mask"),
        (CAUSAL.float(), "hides different keys from different queries"),
        (torch.randn(3, 1, 1, 9), r"holds other values, an attention bias .*\[B, N\] padding mask"),
        ((1.0 - REAL.float()) * -10.0, r"additive \(0 at real tokens, at most -1000 at pads"),
        (REAL.long() * 2, r"An integer 4-D attention_mask must hold 0 \(pad\) and 1 \(real token\)"),
        (REAL.expand(3, 2, 1, 9), r"attention_mask of shape \[3, 2, 1, 9\] does not fit an input of 3 sequences of 9"),
        (REAL.expand(3, 1, 5, 9), r"shape \[3, 1, 5, 9\] does not fit .* \[3, 1, 1, 9\] or \[3, 1, 9, 9\]"),
        (MASK[:, None, :], r"shape \[3, 1, 9\] does not fit .* pass \[B, N\] = \[3, 9\]"),
        (MASK[:, :5], r"shape \[3, 5\] does not fit"),
        (MASK[:2], r"shape \[2, 9\] does not fit"),
    ],
    ids=["causal", "causal float", "bias", "small negative", "int 2", "per head", "5 queries", "3-D", "short", "batch"],
)
def test_a_mask_that_is_not_padding_is_refused(mask, match):
    model = hf_effattn.EffAttnRobertaModel(text_config("psf")).eval()
    with pytest.raises(ValueError, match=match):
        model(input_ids=INPUTS["input_ids"], attention_mask=mask)


@pytest.mark.parametrize("name", hf_effattn.list_attentions())
def test_an_empty_batch_gives_empty_outputs(name):
    """As every PyTorch layer does (Transformers' RobertaModel fails with a reshape error); in training mode too, with
    gradients, hidden states and attention matrices."""
    model = hf_effattn.EffAttnRobertaForSequenceClassification(text_config(name, num_labels=2)).train()
    empty = torch.zeros(0, 9, dtype=torch.long)
    for mask in (None, empty, empty[:, None, None, :]):
        outputs = model(input_ids=empty, attention_mask=mask, output_hidden_states=True, output_attentions=True)
        assert outputs.logits.shape == (0, 2)
        assert [tuple(h.shape) for h in outputs.hidden_states] == [(0, 9, 16)] * 3
        assert all(a.shape[0] == 0 and a.shape[2:] == (9, 9) for a in outputs.attentions)  # PSF: one head
        outputs.logits.sum().backward()
    vision = hf_effattn.EffAttnViTForImageClassification(vision_config(name, num_labels=3)).eval()
    assert vision(pixel_values()[:0]).logits.shape == (0, 3)


def test_a_4d_mask_compiles_as_one_graph():
    """Its values are read without a branch (checked in eager mode only), so ``fullgraph=True`` holds."""
    torch.manual_seed(0)
    model = hf_effattn.EffAttnRobertaModel(text_config("kerformer")).eval()
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    with torch.no_grad():
        reference = model(**INPUTS).last_hidden_state
        for form in ("additive min", "float 0/1"):
            mask = PADDING_FORMS[form]
            outputs = compiled(input_ids=INPUTS["input_ids"], attention_mask=mask)
            assert torch.equal(outputs.last_hidden_state, reference)


def test_a_mask_without_pads_gives_the_unpadded_path_in_eager_mode_only():
    """An all-ones mask (2-D or 4-D) reads as no padding mask in eager mode, so the mechanisms take their unpadded
    kernels (PSF's shift kernel, not its window kernel); under tracing the mask is kept, with no branch on it."""
    from hf_effattn.modeling.masking import padding_mask_from

    ones, padded = torch.ones(2, 5, dtype=torch.long), torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    assert padding_mask_from(ones, 2, 5) is None
    assert padding_mask_from(ones[:, None, None, :], 2, 5) is None
    assert torch.equal(padding_mask_from(padded, 2, 5), padded.bool())
    traced = torch.jit.trace(lambda mask: padding_mask_from(mask, 2, 5), (ones,), check_trace=False)
    assert torch.equal(traced(padded), padded.bool())  # the trace kept the mask: it serves padded batches too
