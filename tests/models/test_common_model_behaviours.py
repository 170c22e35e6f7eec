"""What Transformers' common model tests check of a model beyond loading, for every model class of ours
(``helpers.every_class``), written here: the hidden states' and attention matrices' shapes, tuple outputs equal to
the dict's, gradient checkpointing's gradients, the input and output embeddings (get, set, resize) and the masked-LM
head's tied decoder. Loading: ``test_loading_like_transformers.py``."""

from __future__ import annotations

import pytest
import torch
from helpers.every_class import (
    CHOICES, TEXT_CLASSES, assert_same_outputs, build, every_class, every_class_and_mechanism, inputs_for, is_vision,
    outputs_of,
)
from helpers.models import PAD, TEXT, VISION, enable_checkpointing
from torch import nn

import hf_effattn

LENGTHS = {"text": 7, "vision": (VISION["image_size"] // VISION["patch_size"]) ** 2 + 1}  # tokens of inputs_for's


def sequences(model_class, batch: int = 2) -> tuple[int, int]:
    """The encoder's batch (every choice a sequence) and length for :func:`inputs_for`'s inputs."""
    if is_vision(model_class):
        return batch, LENGTHS["vision"]
    choices = CHOICES if model_class is hf_effattn.EffAttnRobertaForMultipleChoice else 1
    return batch * choices, LENGTHS["text"]


@pytest.mark.parametrize("model_class, mechanism", every_class_and_mechanism())
def test_hidden_states_and_attentions_have_one_entry_a_layer_of_their_shapes(model_class, mechanism):
    model = build(model_class, mechanism)
    config, (batch, length) = model.config, sequences(model_class)
    with torch.no_grad():
        output = model(**inputs_for(model_class), output_hidden_states=True, output_attentions=True)
    assert [tuple(state.shape) for state in output.hidden_states] == \
        [(batch, length, config.hidden_size)] * (config.num_hidden_layers + 1)
    heads = 1 if mechanism == "psf" else config.num_attention_heads  # PSF's factors are shared by the heads
    assert [tuple(matrix.shape) for matrix in output.attentions] == [(batch, heads, length, length)] * \
        config.num_hidden_layers
    with torch.no_grad():
        plain = model(**inputs_for(model_class))
    assert plain.hidden_states is None and plain.attentions is None


@pytest.mark.parametrize("model_class, mechanism", every_class_and_mechanism())
def test_return_dict_false_gives_the_dicts_values_as_a_tuple(model_class, mechanism):
    model = build(model_class, mechanism)
    options = dict(inputs_for(model_class), output_hidden_states=True, output_attentions=True)
    with torch.no_grad():
        as_tuple, as_dict = model(**options, return_dict=False), model(**options)
    assert isinstance(as_tuple, tuple) and len(as_tuple) == len(as_dict.to_tuple()) >= 3
    assert_same_outputs(as_tuple, as_dict.to_tuple(), atol=0, rtol=0)


def gradients(model, inputs: dict) -> tuple[dict[str, torch.Tensor], int]:
    """Every parameter's gradient of the sum of the model's first output, in training mode (no dropout), and how
    many times the first layer's attention ran."""
    calls = []
    hook = model.base_model.encoder.layer[0].attention.self.register_forward_hook(lambda *_: calls.append(1))
    model.train().zero_grad()
    model(**inputs).to_tuple()[0].sum().backward()
    hook.remove()
    return {name: parameter.grad for name, parameter in model.named_parameters() if parameter.grad is not None}, \
        len(calls)


@pytest.mark.parametrize("model_class, mechanism", every_class_and_mechanism())
def test_gradient_checkpointing_gives_the_same_gradients(model_class, mechanism):
    model, inputs = build(model_class, mechanism), inputs_for(model_class)
    plain, once = gradients(model, inputs)
    enable_checkpointing(model)
    checkpointed, twice = gradients(model, inputs)
    assert twice == 2 * once == 2  # the checkpointed layer ran again in the backward pass
    assert plain.keys() == checkpointed.keys() and len(plain) > 10
    for name, gradient in plain.items():
        torch.testing.assert_close(checkpointed[name], gradient, atol=1e-6, rtol=1e-5, msg=name)


def unpadded(inputs: dict) -> dict:
    """Text inputs without pads (their positions are then the same from ids and from embeddings)."""
    ids = inputs["input_ids"].masked_fill(inputs["input_ids"] == PAD, PAD + 2)
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


@pytest.mark.parametrize("model_class, mechanism", every_class())
def test_the_input_embeddings_set_are_the_ones_the_model_reads(model_class, mechanism):
    model, inputs = build(model_class, mechanism), inputs_for(model_class)
    if is_vision(model_class):  # the patches' projection, [B, patches, C]; not to be replaced
        assert model.get_input_embeddings() is model.base_model.embeddings.patch_embeddings
        assert model.get_input_embeddings()(inputs["pixel_values"]).shape == \
            (2, LENGTHS["vision"] - 1, model.config.hidden_size)
        return
    inputs = unpadded(inputs)
    before = outputs_of(model, inputs)
    torch.manual_seed(1)
    replacement = nn.Embedding(TEXT["vocab_size"], model.config.hidden_size, padding_idx=PAD)
    model.set_input_embeddings(replacement)
    assert model.get_input_embeddings() is replacement
    with torch.no_grad():
        embedded = {"inputs_embeds": replacement(inputs["input_ids"]), "attention_mask": inputs["attention_mask"]}
    after = outputs_of(model, inputs)
    assert_same_outputs(after, outputs_of(model, embedded), atol=0, rtol=0)
    assert not torch.allclose(after[0], before[0])


@pytest.mark.parametrize("model_class, mechanism", every_class())
def test_only_the_masked_lm_has_output_embeddings_and_they_are_tied(model_class, mechanism):
    model = build(model_class, mechanism)
    if model_class is not hf_effattn.EffAttnRobertaForMaskedLM:
        assert model.get_output_embeddings() is None
        return
    assert model.get_output_embeddings() is model.lm_head.decoder
    assert model.lm_head.decoder.weight is model.get_input_embeddings().weight


@pytest.mark.parametrize("model_class, mechanism", [case for case in every_class() if case.values[0] in TEXT_CLASSES])
@pytest.mark.parametrize("new_size", [TEXT["vocab_size"] + 5, TEXT["vocab_size"] - 5])
def test_resize_token_embeddings_keeps_the_kept_rows_and_reads_the_new_ids(model_class, mechanism, new_size):
    model = build(model_class, mechanism)
    old = model.get_input_embeddings().weight.detach().clone()
    resized = model.resize_token_embeddings(new_size)
    assert resized is model.get_input_embeddings() and resized.weight.shape == (new_size, model.config.hidden_size)
    assert model.config.vocab_size == new_size
    kept = min(new_size, TEXT["vocab_size"])
    torch.testing.assert_close(resized.weight[:kept], old[:kept], atol=0, rtol=0)
    inputs = inputs_for(model_class)
    inputs["input_ids"] = inputs["input_ids"].clamp(max=new_size - 1)
    output = outputs_of(model, inputs)
    if model_class is hf_effattn.EffAttnRobertaForMaskedLM:  # the decoder follows: tied, one logit a token
        assert model.lm_head.decoder.weight is resized.weight and output[0].shape[-1] == new_size


def test_an_untied_masked_lm_head_is_its_own_and_saved(tmp_path):
    model = build(hf_effattn.EffAttnRobertaForMaskedLM, "kerformer", tie_word_embeddings=False)
    decoder = model.lm_head.decoder.weight
    assert decoder is not model.get_input_embeddings().weight
    with torch.no_grad():
        decoder.add_(1.0)
    model.save_pretrained(tmp_path)
    reloaded = hf_effattn.EffAttnRobertaForMaskedLM.from_pretrained(tmp_path)
    assert reloaded.lm_head.decoder.weight is not reloaded.get_input_embeddings().weight
    torch.testing.assert_close(reloaded.lm_head.decoder.weight, decoder, atol=0, rtol=0)
    inputs = inputs_for(hf_effattn.EffAttnRobertaForMaskedLM)
    assert_same_outputs(outputs_of(reloaded, inputs), outputs_of(model, inputs), atol=0, rtol=0)


def test_a_tied_masked_lm_head_is_tied_again_once_loaded(tmp_path):
    model = build(hf_effattn.EffAttnRobertaForMaskedLM, "dba")
    model.save_pretrained(tmp_path)
    reloaded = hf_effattn.EffAttnRobertaForMaskedLM.from_pretrained(tmp_path)
    assert reloaded.lm_head.decoder.weight is reloaded.get_input_embeddings().weight
    torch.testing.assert_close(reloaded.lm_head.decoder.weight, model.lm_head.decoder.weight, atol=0, rtol=0)
