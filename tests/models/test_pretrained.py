"""Loading RoBERTa, BERT and ViT checkpoints (saved here with the Transformers classes) into our classes:
with ``attention_type="sdpa"`` the outputs equal the Transformers model's; with another mechanism every
shared weight is reused and the new and dropped ones are logged; our own checkpoints refuse a silent change
of mechanism."""

from __future__ import annotations

import json
import logging

import pytest
import torch
import transformers
from safetensors import safe_open

import hf_effattn
from helpers.models import pixel_values, save_source, text_config, text_inputs

TEXT_PAIRS = [
    ("RobertaModel", "EffAttnRobertaModel"),
    ("RobertaForMaskedLM", "EffAttnRobertaForMaskedLM"),
    ("RobertaForSequenceClassification", "EffAttnRobertaForSequenceClassification"),
    ("RobertaForTokenClassification", "EffAttnRobertaForTokenClassification"),
    ("RobertaForQuestionAnswering", "EffAttnRobertaForQuestionAnswering"),
    ("RobertaForMultipleChoice", "EffAttnRobertaForMultipleChoice"),
    # BERT's heads, except sequence classification (a linear layer on the pooler, unlike RoBERTa's head).
    ("BertModel", "EffAttnRobertaModel"),
    ("BertForMaskedLM", "EffAttnRobertaForMaskedLM"),
    ("BertForTokenClassification", "EffAttnRobertaForTokenClassification"),
    ("BertForQuestionAnswering", "EffAttnRobertaForQuestionAnswering"),
    ("BertForMultipleChoice", "EffAttnRobertaForMultipleChoice"),
]
VISION_PAIRS = [
    ("ViTModel", "EffAttnViTModel"),
    ("ViTForImageClassification", "EffAttnViTForImageClassification"),
    ("ViTForMaskedImageModeling", "EffAttnViTForMaskedImageModeling"),
]


def output_tensors(output) -> list[torch.Tensor]:
    """The tensors of a model output, in order (ours carry an extra ``aux_loss``, None in eval mode)."""
    return [value for value in output.values() if isinstance(value, torch.Tensor)]


def assert_same_outputs(reference, ours, **inputs):
    with torch.no_grad():
        expected, actual = output_tensors(reference(**inputs)), output_tensors(ours(**inputs))
    assert len(expected) == len(actual)
    for e, a in zip(expected, actual):
        torch.testing.assert_close(a, e, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("source_name, our_name", TEXT_PAIRS)
def test_text_checkpoint_with_sdpa_matches_transformers(tmp_path, source_name, our_name):
    kind = "bert" if source_name.startswith("Bert") else "roberta"
    reference = save_source(getattr(transformers, source_name), kind, tmp_path)
    ours = getattr(hf_effattn, our_name).from_pretrained(tmp_path)
    assert ours.config.attention_type == "sdpa" and ours.config.roberta_positions == (kind == "roberta")
    inputs = text_inputs(pad_token_id=reference.config.pad_token_id)
    if "MultipleChoice" in source_name:
        inputs = {name: x.view(1, 3, -1) for name, x in inputs.items()}
    assert_same_outputs(reference, ours, **inputs)


@pytest.mark.parametrize("original_format", [True, False], ids=["old-names", "transformers5-names"])
@pytest.mark.parametrize("source_name, our_name", VISION_PAIRS)
def test_vit_checkpoint_with_sdpa_matches_transformers(tmp_path, source_name, our_name, original_format):
    reference = save_source(getattr(transformers, source_name), "vit", tmp_path, save_original_format=original_format)
    with safe_open(tmp_path / "model.safetensors", "pt") as weights:
        assert any(".attention.attention.query." in k for k in weights.keys()) == original_format
    ours = getattr(hf_effattn, our_name).from_pretrained(tmp_path)
    inputs = {"pixel_values": pixel_values()}
    if "Masked" in source_name:
        inputs["bool_masked_pos"] = torch.tensor([[True, False, True, False], [False, False, True, True]])
    assert_same_outputs(reference, ours, **inputs)


@pytest.mark.parametrize("attention_type, new, dropped", [
    ("kerformer", "attention.self.se_reduce.weight", None),
    ("singularformer", "attention.self.pooling.weight", None),
    ("dba", "attention.self.hidden_compression", None),
    ("psf", "attention.self.factor_in_weight", "attention.self.query.weight"),
    ("nystromformer", "attention.self.conv.weight", None),
    ("linformer", "attention.self.key_projection", None),
])
def test_mechanism_reuses_shared_weights_and_logs_the_rest(tmp_path, caplog, attention_type, new, dropped):
    reference = save_source(transformers.RobertaForSequenceClassification, "roberta", tmp_path)
    with caplog.at_level(logging.WARNING, logger="hf_effattn"):
        model = hf_effattn.EffAttnRobertaForSequenceClassification.from_pretrained(
            tmp_path, attention_type=attention_type
        )
    message = next(r.getMessage() for r in caplog.records if "New parameters" in r.getMessage())
    new_part, dropped_part = message.split("Dropped from the checkpoint")
    assert f"roberta.encoder.layer.*.{new}" in new_part
    assert (f"roberta.encoder.layer.*.{dropped}" in dropped_part) if dropped else dropped_part.endswith("none.")
    shared = reference.state_dict()
    for name, tensor in model.state_dict().items():
        if name in shared:
            torch.testing.assert_close(tensor, shared[name], msg=name)


def test_converted_bert_saves_under_our_names_and_reloads(tmp_path):
    save_source(transformers.BertForMaskedLM, "bert", tmp_path / "bert")
    model = hf_effattn.EffAttnRobertaForMaskedLM.from_pretrained(tmp_path / "bert", attention_type="kerformer")
    model.save_pretrained(tmp_path / "ours")
    with safe_open(tmp_path / "ours" / "model.safetensors", "pt") as weights:
        assert all(k.startswith(("roberta.", "lm_head.")) for k in weights.keys())
    reloaded = hf_effattn.EffAttnRobertaForMaskedLM.from_pretrained(tmp_path / "ours")
    assert not reloaded.config.roberta_positions
    assert_same_outputs(model, reloaded, **text_inputs(pad_token_id=0))


def test_own_checkpoint_refuses_another_mechanism(tmp_path):
    model = hf_effattn.create_model("singularformer-text/dba", num_labels=2, num_hidden_layers=1, hidden_size=48)
    model.save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="attention_type='dba'.*attention_type='kerformer'.*convert_attention=True"):
        hf_effattn.EffAttnRobertaForSequenceClassification.from_pretrained(tmp_path, attention_type="kerformer")
    with pytest.raises(ValueError, match="convert_attention=True"):
        hf_effattn.EffAttnRobertaForSequenceClassification.from_pretrained(
            tmp_path, attention_config={"compressed_length": 8}
        )
    with pytest.raises(ValueError, match="convert_attention=True"):  # through the Auto class and its config
        transformers.AutoModelForSequenceClassification.from_pretrained(tmp_path, attention_type="psf")
    same = hf_effattn.EffAttnRobertaForSequenceClassification.from_pretrained(tmp_path, attention_type="dba")
    assert same.config.attention_config == model.config.attention_config


def test_explicit_conversion_is_logged(tmp_path, caplog):
    model = hf_effattn.create_model("roberta-base/sdpa", num_labels=2, num_hidden_layers=1, hidden_size=48)
    model.save_pretrained(tmp_path)
    with caplog.at_level(logging.WARNING, logger="hf_effattn"):
        model = hf_effattn.EffAttnRobertaForSequenceClassification.from_pretrained(
            tmp_path, attention_type="psf", convert_attention=True
        )
    assert model.config.attention_type == "psf"
    assert any("Converting" in r.getMessage() for r in caplog.records)
    assert any("attention.self.query.weight" in r.getMessage() for r in caplog.records)


def test_checkpoint_of_another_architecture_is_refused(tmp_path):
    save_source(transformers.ViTModel, "vit", tmp_path)
    with pytest.raises(ValueError, match="model_type 'vit'"):
        hf_effattn.EffAttnRobertaModel.from_pretrained(tmp_path)


@pytest.fixture
def transformers_logs(caplog):
    """``caplog`` also receiving Transformers' own log records (its library logger does not propagate to the root)."""
    library = logging.getLogger("transformers")
    library.addHandler(caplog.handler)
    with caplog.at_level(logging.WARNING):
        yield caplog
    library.removeHandler(caplog.handler)


def test_conversion_prints_one_load_report(tmp_path, transformers_logs):
    save_source(transformers.RobertaForSequenceClassification, "roberta", tmp_path)
    hf_effattn.EffAttnRobertaForSequenceClassification.from_pretrained(tmp_path, attention_type="psf")
    messages = [record.getMessage() for record in transformers_logs.records]
    assert not any("LOAD REPORT" in message for message in messages)  # Transformers' table: held back
    assert sum("New parameters" in message for message in messages) == 1  # ours


def test_an_encoder_checkpoint_gets_a_new_head_without_being_called_corrupted(tmp_path, transformers_logs):
    save_source(transformers.RobertaModel, "roberta", tmp_path)  # no masked-LM head, as MiniLM ships
    hf_effattn.EffAttnRobertaForMaskedLM.from_pretrained(tmp_path)
    messages = [record.getMessage() for record in transformers_logs.records]
    assert not any("corrupted" in message for message in messages)
    report = next(message for message in messages if "New parameters" in message)
    assert "lm_head.bias" in report and "lm_head.decoder.bias" in report


def test_failed_load_still_shows_the_report_its_error_refers_to(tmp_path, transformers_logs):
    save_source(transformers.RobertaForSequenceClassification, "roberta", tmp_path)  # 2 labels
    with pytest.raises(ValueError, match="load report above lists them. Pass ignore_mismatched_sizes=True"):
        hf_effattn.EffAttnRobertaForSequenceClassification.from_pretrained(tmp_path, num_labels=3)
    report = next(record.getMessage() for record in transformers_logs.records if "LOAD REPORT" in record.getMessage())
    assert "classifier.out_proj.weight" in report


def test_auto_class_converts_an_own_checkpoint_explicitly(tmp_path):
    # The Auto class hands attention_type to AutoConfig first: the saved mechanism's settings must not follow it.
    saved = hf_effattn.EffAttnRobertaModel(text_config("kerformer")).eval()
    saved.save_pretrained(tmp_path)
    model = transformers.AutoModel.from_pretrained(tmp_path, attention_type="dba", convert_attention=True)
    assert (model.config.attention_type, model.config.attention_config) == (
        "dba", hf_effattn.build_settings("dba").to_dict())
    for name in ("query", "key", "value"):
        torch.testing.assert_close(model.encoder.layer[1].attention.self.get_submodule(name).weight,
                                   saved.encoder.layer[1].attention.self.get_submodule(name).weight)
    channel = transformers.AutoModel.from_pretrained(tmp_path, attention_config={"se_mode": "none"},
                                                     convert_attention=True)
    assert channel.config.attention_config == {"se_mode": "none", "se_reduction": 4, "eps": 1e-6}


def test_settings_that_change_weight_shapes_need_ignore_mismatched_sizes(tmp_path, caplog):
    saved = hf_effattn.EffAttnRobertaModel(text_config("kerformer")).eval()  # se_mode "token": SE-K sized by N_max
    saved.save_pretrained(tmp_path)
    channel = dict(attention_config={"se_mode": "channel"}, convert_attention=True)
    with pytest.raises(ValueError, match="other shapes.*ignore_mismatched_sizes=True"):
        hf_effattn.EffAttnRobertaModel.from_pretrained(tmp_path, **channel)
    with caplog.at_level(logging.WARNING, logger="hf_effattn"):
        model = hf_effattn.EffAttnRobertaModel.from_pretrained(tmp_path, ignore_mismatched_sizes=True, **channel)
    assert "shapes changed (ignore_mismatched_sizes): encoder.layer.*.attention.self.se_expand.bias" in caplog.text
    assert model.encoder.layer[0].attention.self.se_expand.weight.shape == (8, 2)  # d -> d / 4 -> d = 8
    torch.testing.assert_close(model.encoder.layer[0].attention.self.se_reduce.weight,
                               saved.encoder.layer[0].attention.self.se_reduce.weight)


def test_converted_bert_keeps_its_special_token_ids(tmp_path):
    save_source(transformers.BertModel, "bert", tmp_path)
    config_file = tmp_path / "config.json"
    config = json.loads(config_file.read_text())
    for name in ("bos_token_id", "eos_token_id"):  # as google-bert/bert-base-uncased's config.json: not there
        del config[name]
    config_file.write_text(json.dumps(config))
    model = hf_effattn.EffAttnRobertaModel.from_pretrained(tmp_path, attention_type="psf")
    reference = transformers.BertConfig.from_pretrained(tmp_path)
    assert (model.config.pad_token_id, model.config.bos_token_id, model.config.eos_token_id) == (
        reference.pad_token_id, reference.bos_token_id, reference.eos_token_id) == (0, None, None)
