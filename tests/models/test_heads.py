"""Every head under every mechanism: shapes, losses as Transformers computes them plus the mechanisms'
auxiliary loss, padding invariance through the whole model, hidden states and attention matrices."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import hf_effattn
from helpers.models import MECHANISMS, NO_DROPOUT, pixel_values, text_config, text_inputs, vision_config

BATCH, LENGTH, LABELS = 3, 9, 3


def text_labels(head: str) -> dict:
    generator = torch.Generator().manual_seed(1)
    if head == "EffAttnRobertaForMaskedLM":
        return {"labels": torch.randint(0, 40, (BATCH, LENGTH), generator=generator)}
    if head == "EffAttnRobertaForTokenClassification":
        return {"labels": torch.randint(0, LABELS, (BATCH, LENGTH), generator=generator)}
    if head == "EffAttnRobertaForQuestionAnswering":
        return {"start_positions": torch.tensor([1, 2, 30]), "end_positions": torch.tensor([3, 4, 5])}
    if head == "EffAttnRobertaForMultipleChoice":
        return {"labels": torch.tensor([2])}
    return {"labels": torch.tensor([0, 2, 1])}


TEXT_HEADS = [
    "EffAttnRobertaForMaskedLM", "EffAttnRobertaForSequenceClassification", "EffAttnRobertaForTokenClassification",
    "EffAttnRobertaForQuestionAnswering", "EffAttnRobertaForMultipleChoice",
]


def task_loss(head: str, output, labels: dict) -> torch.Tensor:
    """The loss Transformers' head computes from our logits."""
    if head == "EffAttnRobertaForQuestionAnswering":
        ignored = output.start_logits.shape[1]
        loss = nn.CrossEntropyLoss(ignore_index=ignored)
        return (loss(output.start_logits, labels["start_positions"].clamp(0, ignored))
                + loss(output.end_logits, labels["end_positions"].clamp(0, ignored))) / 2
    logits = output.logits
    return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels["labels"].view(-1))


@pytest.mark.parametrize("attention_type", MECHANISMS)
@pytest.mark.parametrize("head", TEXT_HEADS)
def test_text_head_loss_is_task_loss_plus_aux_loss(attention_type, head):
    torch.manual_seed(0)
    num_labels = 2 if head == "EffAttnRobertaForQuestionAnswering" else LABELS  # start and end logits
    model = getattr(hf_effattn, head)(text_config(attention_type, num_labels=num_labels)).train()
    inputs, labels = text_inputs(BATCH, LENGTH), text_labels(head)
    if head == "EffAttnRobertaForMultipleChoice":
        inputs = {name: x.view(1, BATCH, LENGTH) for name, x in inputs.items()}
    output = model(**inputs, **labels)
    has_aux = hf_effattn.get_attention_class(attention_type).has_aux_loss
    assert (output.aux_loss is not None) == has_aux
    expected = task_loss(head, output, labels) + (output.aux_loss if has_aux else 0)
    torch.testing.assert_close(output.loss, expected)
    output.loss.backward()
    assert all(p.grad is not None for n, p in model.named_parameters() if "encoder.layer.1" in n)


@pytest.mark.parametrize("attention_type", MECHANISMS)
def test_vision_heads(attention_type):
    torch.manual_seed(0)
    config = vision_config(attention_type, num_labels=LABELS)
    classifier = hf_effattn.EffAttnViTForImageClassification(config).train()
    output = classifier(pixel_values(), labels=torch.tensor([0, 2]))
    aux = output.aux_loss if output.aux_loss is not None else 0
    torch.testing.assert_close(output.loss, nn.functional.cross_entropy(output.logits, torch.tensor([0, 2])) + aux)
    mim = hf_effattn.EffAttnViTForMaskedImageModeling(config).train()
    output = mim(pixel_values(), bool_masked_pos=torch.tensor([[True, False, True, False]] * 2))
    assert output.reconstruction.shape == pixel_values().shape and output.loss.ndim == 0
    output.loss.backward()


@pytest.mark.parametrize("num_labels, labels, problem_type, loss_fn", [
    (1, torch.tensor([0.5, -1.0, 2.0]), "regression", lambda logits, y: nn.functional.mse_loss(logits.squeeze(), y)),
    (3, torch.tensor([0, 2, 1]), "single_label_classification", nn.functional.cross_entropy),
    (3, torch.tensor([[1.0, 0, 1], [0, 0, 1], [1, 1, 0]]), "multi_label_classification",
     nn.functional.binary_cross_entropy_with_logits),
])
@pytest.mark.parametrize("family", ["text", "vision"])
def test_sequence_classification_problem_types(family, num_labels, labels, problem_type, loss_fn):
    torch.manual_seed(0)
    if family == "text":
        model = hf_effattn.EffAttnRobertaForSequenceClassification(text_config(num_labels=num_labels)).eval()
        inputs = text_inputs(BATCH)
    else:
        model = hf_effattn.EffAttnViTForImageClassification(vision_config(num_labels=num_labels)).eval()
        inputs = {"pixel_values": pixel_values(BATCH)}
    output = model(**inputs, labels=labels)
    assert model.config.problem_type == problem_type
    torch.testing.assert_close(output.loss, loss_fn(output.logits, labels))


@pytest.mark.parametrize("attention_type", MECHANISMS)
def test_padding_invariance_through_the_model(attention_type):
    """A sequence's outputs at its real tokens do not depend on right or left padding in the batch."""
    torch.manual_seed(0)
    model = hf_effattn.EffAttnRobertaModel(text_config(attention_type)).double().eval()
    inputs = text_inputs(BATCH, LENGTH)
    with torch.no_grad():
        batched = model(**inputs).last_hidden_state
        for b in range(BATCH):
            real = inputs["attention_mask"][b].bool()
            alone = model(inputs["input_ids"][b : b + 1, real]).last_hidden_state[0]
            torch.testing.assert_close(batched[b, real], alone, atol=1e-8, rtol=1e-8)


@pytest.mark.parametrize("attention_type", MECHANISMS)
def test_hidden_states_and_attention_matrices(attention_type):
    torch.manual_seed(0)
    config = text_config(attention_type)
    model = hf_effattn.EffAttnRobertaModel(config).eval()
    inputs = text_inputs(BATCH, LENGTH)
    output = model(**inputs, output_hidden_states=True, output_attentions=True)
    assert len(output.hidden_states) == config.num_hidden_layers + 1
    assert output.hidden_states[-1] is output.last_hidden_state
    assert len(output.attentions) == config.num_hidden_layers
    pads = ~inputs["attention_mask"].bool()
    for attentions in output.attentions:
        assert attentions.shape[0] == BATCH and attentions.shape[-2:] == (LENGTH, LENGTH)
        # Real queries never attend to pads: the columns of pad keys are zero.
        real_rows = attentions.masked_fill(pads[:, None, :, None], 0)
        assert real_rows.masked_select(pads[:, None, None, :]).abs().max() == 0
    plain = model(**inputs)
    assert plain.hidden_states is None and plain.attentions is None
    torch.testing.assert_close(plain.last_hidden_state, output.last_hidden_state)


def test_aux_loss_is_the_mean_over_layers():
    torch.manual_seed(0)
    model = hf_effattn.EffAttnRobertaModel(text_config("singularformer", num_hidden_layers=3)).train()
    per_layer = []
    for layer in model.encoder.layer:
        layer.attention.self.register_forward_hook(lambda module, args, output: per_layer.append(output.aux_loss))
    output = model(**text_inputs())
    assert len(per_layer) == 3
    torch.testing.assert_close(output.aux_loss, torch.stack(per_layer).mean())
    assert model.eval()(**text_inputs()).aux_loss is None


@pytest.mark.parametrize("layer_class, config", [
    (hf_effattn.EffAttnRobertaLayer, text_config("dba")), (hf_effattn.EffAttnViTLayer, vision_config("dba")),
])
def test_layer_runs_alone(layer_class, config):
    layer = layer_class(config, layer_idx=0)
    x, mask = torch.randn(2, 5, config.hidden_size), torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]]).bool()
    hidden_states, state, aux_loss, attentions = layer(x, mask)
    assert hidden_states.shape == x.shape and state.shape == (2, 16, config.hidden_size)
    assert aux_loss is None and attentions is None
    assert layer_class(config, layer_idx=1)(x, mask, state).hidden_states.shape == x.shape


def test_tuple_outputs_and_inputs_embeds():
    torch.manual_seed(0)
    model = hf_effattn.EffAttnRobertaForSequenceClassification(text_config(num_labels=LABELS)).eval()
    input_ids = text_inputs(1)["input_ids"]
    output = model(input_ids, labels=torch.tensor([1]), return_dict=False)
    assert isinstance(output, tuple) and output[0].ndim == 0 and output[1].shape == (1, LABELS)
    embeds = model.get_input_embeddings()(input_ids)
    torch.testing.assert_close(model(inputs_embeds=embeds).logits, output[1])
    with pytest.raises(ValueError, match="exactly one of input_ids or inputs_embeds"):
        model(input_ids, inputs_embeds=embeds)


def test_dropout_settings_reach_the_mechanism():
    config = text_config("kerformer", **{**NO_DROPOUT, "attention_probs_dropout_prob": 0.25})
    model = hf_effattn.EffAttnRobertaModel(config)
    assert model.encoder.layer[0].attention.self.dropout.p == 0.25
