"""Extending a model past its checkpoint's input size: ``from_pretrained(..., max_length=N)`` / ``image_size=S``,
``convert(..., max_length=N)`` and ``hf-effattn convert --max_length N``."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers

import hf_effattn
from hf_effattn.commands import main as cli
from hf_effattn.conversion import convert
from hf_effattn.modeling.attentions import get_attention_class, list_attentions
from hf_effattn.modeling.position_extension import learned_length, tile_to_length
from helpers.finetuning import MAX_LENGTH, tiny_text_checkpoint
from helpers.models import (
    MINILM, PAD, assert_loads_as_remote_code, pixel_values, save_source, text_config, text_inputs, vision_config,
)

LONG = 50  # the extended maximum length; the tiny checkpoints take 18 tokens (RoBERTa) or 20 (BERT)
LENGTH_SIZED = [name for name in list_attentions() if get_attention_class(name).needs_max_length]
SOURCES = {"roberta": transformers.RobertaModel, "bert": transformers.BertModel}


def loaded(folder, output_loading_info=False, **kwargs):
    """``EffAttnRobertaModel.from_pretrained(folder, **kwargs)`` in eval mode (and its loading info)."""
    model, info = hf_effattn.EffAttnRobertaModel.from_pretrained(folder, output_loading_info=True, **kwargs)
    return (model.eval(), info) if output_loading_info else model.eval()


def hidden(model, inputs) -> torch.Tensor:
    with torch.no_grad():
        return model(**inputs).last_hidden_state


def test_tile_blocks_keeps_the_reserved_rows_and_repeats_the_others():
    table = torch.arange(6.0)[:, None].expand(6, 2)  # rows 0, 1 reserved; 2 .. 5 learned
    expected = torch.tensor([0.0, 1, 2, 3, 4, 5, 2, 3, 4, 5, 2])[:, None].expand(11, 2)
    torch.testing.assert_close(tile_to_length(table, 11, first=2), expected, rtol=0, atol=0)
    torch.testing.assert_close(tile_to_length(table.t(), 8, dim=1), torch.tensor([0.0, 1, 2, 3, 4, 5, 0, 1]).expand(2, 8),
                               rtol=0, atol=0)


@pytest.mark.parametrize("kind", SOURCES)
def test_extended_sdpa_model_computes_what_transformers_does(kind, tmp_path):
    """On inputs that fit the checkpoint (right- and left-padded rows included) the extended model gives exactly
    the outputs of Transformers' own class and of the unextended model; its position table follows the copy rule;
    inputs up to the new length run."""
    reference = save_source(SOURCES[kind], kind, tmp_path)
    original = loaded(tmp_path)
    extended, info = loaded(tmp_path, max_length=LONG, output_loading_info=True)
    first = PAD + 1 if kind == "roberta" else 0  # BERT positions have no reserved rows
    old_length = original.config.attention_max_length
    assert extended.config.attention_max_length == LONG
    assert extended.config.max_position_embeddings == LONG + first
    assert info["position_extension"] == {"argument": "max_length", "from": old_length, "to": LONG,
                                          "parameters": ["embeddings.position_embeddings.weight"]}
    old_rows = original.embeddings.position_embeddings.weight
    new_rows = extended.embeddings.position_embeddings.weight
    copied = first + torch.arange(LONG) % old_length
    torch.testing.assert_close(new_rows, torch.cat([old_rows[:first], old_rows[copied]]), rtol=0, atol=0)
    torch.testing.assert_close(extended.embeddings.token_type_embeddings.weight,
                               reference.embeddings.token_type_embeddings.weight, rtol=0, atol=0)
    for length in (5, old_length):
        inputs = text_inputs(length=length, pad_token_id=reference.config.pad_token_id)
        expected = hidden(reference, inputs)
        torch.testing.assert_close(hidden(extended, inputs), expected, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(hidden(extended, inputs), hidden(original, inputs), rtol=0, atol=0)
    assert hidden(extended, text_inputs(length=LONG)).shape == (3, LONG, 16)
    with pytest.raises(ValueError, match=rf"Input length {LONG + 1} exceeds .*max_length={LONG + 1}\)"):
        extended(torch.full((1, LONG + 1), 5))


@pytest.mark.parametrize(("attention_type", "attention_config"), [
    *[(name, {}) for name in LENGTH_SIZED], ("psf", {"residual": True}), ("linformer", {"share_kv": False}),
])
def test_extended_length_sized_weights_keep_the_outputs_of_old_lengths(attention_type, attention_config, tmp_path):
    """A checkpoint of ours with a mechanism whose weights are sized by the maximum length, extended later: on
    inputs that fit the old length (padded too) it computes what it did; the extended weights are listed."""
    torch.manual_seed(0)
    hf_effattn.EffAttnRobertaModel(text_config(attention_type, attention_config=attention_config)).save_pretrained(
        tmp_path)
    original = loaded(tmp_path)
    extended, info = loaded(tmp_path, max_length=LONG, output_loading_info=True)
    grown = {name for name, parameter in original.named_parameters()
             if parameter.shape != extended.get_parameter(name).shape}
    assert grown and grown <= set(info["position_extension"]["parameters"])
    assert not info["missing_keys"] and not info["unexpected_keys"]
    for length in (6, original.config.attention_max_length):
        inputs = text_inputs(length=length)
        torch.testing.assert_close(hidden(extended, inputs), hidden(original, inputs), rtol=1e-6, atol=1e-6)
    assert hidden(extended, text_inputs(length=LONG)).isfinite().all()
    extended.save_pretrained(tmp_path / "extended")  # saved at the new size, it loads as it is
    reloaded = loaded(tmp_path / "extended")
    torch.testing.assert_close(hidden(reloaded, text_inputs(length=LONG)), hidden(extended, text_inputs(length=LONG)),
                               rtol=0, atol=0)


def test_each_rule_on_its_weights():
    """Kerformer's SE-K rows and Linformer's columns repeat in blocks; PSF's new links weigh zero and its new
    factors are identities."""
    kerformer = hf_effattn.EffAttnRobertaModel(text_config("kerformer")).encoder.layer[0].attention.self
    rows = kerformer.se_expand.weight.clone()
    kerformer.extend_max_length(LONG)
    torch.testing.assert_close(kerformer.se_expand.weight, rows[torch.arange(LONG) % 18], rtol=0, atol=0)
    assert kerformer.se_expand.out_features == kerformer.max_length == LONG
    linformer = hf_effattn.EffAttnRobertaModel(
        text_config("linformer", attention_config={"share_kv": False})).encoder.layer[0].attention.self
    old = [projection.clone() for projection in linformer.length_projections()]
    linformer.extend_max_length(LONG)
    for before, after in zip(old, linformer.length_projections()):
        torch.testing.assert_close(after, before[:, torch.arange(LONG) % 18], rtol=0, atol=0)
    psf = hf_effattn.EffAttnRobertaModel(text_config("psf")).encoder.layer[0].attention.self
    assert (psf.num_factors, psf.num_links) == (5, 5)  # ceil(log2 18)
    psf.extend_max_length(LONG)
    assert (psf.num_factors, psf.num_links) == (6, 6)  # ceil(log2 50)
    assert psf.factor_out_weight[:, :, 5].eq(0).all() and psf.factor_out_bias[:, :, 5].eq(0).all()
    assert psf.factor_out_weight[5].eq(0).all()
    torch.testing.assert_close(psf.factor_out_bias[5, 0], torch.tensor([1.0, 0, 0, 0, 0, 0]), rtol=0, atol=0)


def test_equal_length_is_a_no_op_and_a_smaller_one_is_refused(tmp_path):
    save_source(transformers.RobertaModel, "roberta", tmp_path)
    same, info = loaded(tmp_path, max_length=18, output_loading_info=True)
    assert info["position_extension"] is None and same.config.max_position_embeddings == 20
    with pytest.raises(ValueError, match=rf"max_length=10 is below the 18 of {tmp_path}: .*extended, never cut.*"
                                         r"truncation=True, max_length=10\)"):
        loaded(tmp_path, max_length=10)
    with pytest.raises(ValueError, match=r"Invalid argument max_length=0: it must be a positive integer"):
        loaded(tmp_path, max_length=0)


def test_auto_model_extends_a_checkpoint_of_ours(tmp_path):
    torch.manual_seed(0)
    hf_effattn.EffAttnRobertaForMaskedLM(text_config("kerformer")).save_pretrained(tmp_path)
    model = transformers.AutoModelForMaskedLM.from_pretrained(tmp_path, max_length=LONG)
    assert isinstance(model, hf_effattn.EffAttnRobertaForMaskedLM)
    assert model.config.attention_max_length == model.roberta.encoder.layer[0].attention.self.max_length == LONG
    assert model(**text_inputs(length=LONG)).logits.shape == (3, LONG, 40)


def test_convert_extends_the_model_its_tokenizer_and_card(tmp_path, caplog):
    source = tmp_path / "source"
    save_source(transformers.RobertaForMaskedLM, "roberta", source)
    transformers.RobertaTokenizer().save_pretrained(source)
    argv = ["convert", str(source), "--attention_type", "kerformer", "--max_length", str(LONG),
            "--output_dir", str(tmp_path / "out")]
    with caplog.at_level(logging.WARNING):
        assert cli.main(argv) == 0
    assert f"Extended from max_length 18 to {LONG}" in caplog.text
    assert "roberta.encoder.layer.*.attention.self.se_expand.weight" in caplog.text
    assert json.loads((tmp_path / "out" / "config.json").read_text())["max_position_embeddings"] == LONG + PAD + 1
    assert transformers.AutoTokenizer.from_pretrained(tmp_path / "out").model_max_length == LONG
    card = (tmp_path / "out" / "README.md").read_text()
    assert f"extended at conversion from the source checkpoint's `max_length` of 18 to {LONG}:" in card
    assert "`roberta.embeddings.position_embeddings.weight`, `roberta.encoder.layer.*.attention.self.se_expand" in card
    assert "Inputs beyond the original size have not been trained on." in " ".join(card.split())
    model = hf_effattn.EffAttnRobertaForMaskedLM.from_pretrained(tmp_path / "out").eval()
    inputs = text_inputs(length=LONG)
    with torch.no_grad():
        logits = model(**inputs).logits
    assert logits.shape == (3, LONG, 40)
    assert_loads_as_remote_code(tmp_path / "out", "AutoModelForMaskedLM", inputs, logits)


def test_convert_extends_a_checkpoint_of_ours_keeping_its_mechanism(tmp_path):
    """Without --attention_type, convert keeps the checkpoint's own mechanism and settings: here it only extends."""
    torch.manual_seed(0)
    settings = {"se_mode": "token", "se_reduction": 2}
    hf_effattn.EffAttnRobertaModel(text_config("kerformer", attention_config=settings)).save_pretrained(
        tmp_path / "ours")
    argv = ["convert", str(tmp_path / "ours"), "--max_length", str(LONG), "--output_dir", str(tmp_path / "out")]
    assert cli.main(argv) == 0
    original, extended = loaded(tmp_path / "ours"), loaded(tmp_path / "out")
    assert (extended.config.attention_type, extended.config.attention_config["se_reduction"]) == ("kerformer", 2)
    assert extended.config.attention_max_length == LONG
    inputs = text_inputs(length=original.config.attention_max_length)
    torch.testing.assert_close(hidden(extended, inputs), hidden(original, inputs), rtol=1e-6, atol=1e-6)


def test_convert_refuses_the_other_familys_size(tmp_path):
    save_source(transformers.RobertaModel, "roberta", tmp_path / "source")
    with pytest.raises(ValueError, match="--image_size does not apply to a text checkpoint: .* --max_length"):
        convert(tmp_path / "source", "sdpa", tmp_path / "out", image_size=16)
    assert not (tmp_path / "out").exists()


def test_vit_extended_to_a_larger_image_computes_what_interpolation_does(tmp_path):
    """The saved model takes 16x16 images without interpolate_pos_encoding and gives what Transformers' ViT gives
    with it; the image processor saved by convert resizes to 16x16; Linformer's projections are extended too."""
    reference = save_source(transformers.ViTModel, "vit", tmp_path / "source")
    transformers.ViTImageProcessor(size={"height": 8, "width": 8}).save_pretrained(tmp_path / "source")
    model = convert(tmp_path / "source", "sdpa", tmp_path / "out", image_size=16).eval()
    assert model.config.image_size == 16 and model.config.attention_max_length == 17
    larger = torch.randn(2, 3, 16, 16, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        expected = reference(larger, interpolate_pos_encoding=True).last_hidden_state
        reloaded = hf_effattn.EffAttnViTModel.from_pretrained(tmp_path / "out").eval()
        torch.testing.assert_close(reloaded(larger).last_hidden_state, expected, rtol=1e-5, atol=1e-5)
    processor = transformers.AutoImageProcessor.from_pretrained(tmp_path / "out")
    assert processor(np.zeros((3, 40, 40), dtype=np.uint8), return_tensors="pt")["pixel_values"].shape == (1, 3, 16, 16)
    linformer, info = hf_effattn.EffAttnViTModel.from_pretrained(
        tmp_path / "source", attention_type="linformer", image_size=16, output_loading_info=True)
    assert linformer.encoder.layer[0].attention.self.key_projection.shape == (256, 17)
    assert "encoder.layer.0.attention.self.key_projection" in info["position_extension"]["parameters"]
    with pytest.raises(ValueError, match=r"image_size=\(4, 4\) is below the \(8, 8\) .*interpolate_pos_encoding=True"):
        hf_effattn.EffAttnViTModel.from_pretrained(tmp_path / "source", image_size=4)
    assert hf_effattn.EffAttnViTModel(vision_config())(pixel_values()).last_hidden_state.shape == (2, 5, 16)


def test_auto_config_image_size_extends_a_vit_of_ours(tmp_path):
    """AutoConfig puts image_size into the config; the model is still loaded at the checkpoint's size, then
    extended."""
    torch.manual_seed(0)
    hf_effattn.EffAttnViTForImageClassification(vision_config("kerformer")).save_pretrained(tmp_path)
    model = transformers.AutoModelForImageClassification.from_pretrained(tmp_path, image_size=16)
    assert model.vit.encoder.layer[0].attention.self.se_expand.out_features == 17
    assert model(torch.randn(1, 3, 16, 16)).logits.shape == (1, 2)


def test_real_minilm_converted_with_more_positions_matches_transformers(tmp_path):
    """The real MiniLM (BERT positions, a sentence-transformers folder whose Normalize module has no folder)."""
    folder = MINILM
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    inputs = tokenizer(["Positions are copied in blocks.", "A short one."], padding=True, return_tensors="pt")
    reference = transformers.BertModel.from_pretrained(folder).eval()
    extended = convert(str(folder), "sdpa", tmp_path, max_length=1024).eval()
    torch.testing.assert_close(hidden(extended, inputs), hidden(reference, inputs), rtol=1e-5, atol=1e-5)
    saved_tokenizer = transformers.AutoTokenizer.from_pretrained(tmp_path)
    assert saved_tokenizer.model_max_length == 1024 and (tmp_path / "1_Pooling" / "config.json").is_file()
    long = saved_tokenizer(" ".join(["word"] * 1100), truncation=True, return_tensors="pt")
    assert hidden(extended, long).shape == (1, 1024, 384)
    # sentence-transformers reads as far as the model: its max_seq_length (256 in the source) follows the extension
    assert json.loads((folder / "sentence_bert_config.json").read_text())["max_seq_length"] == 256
    assert json.loads((tmp_path / "sentence_bert_config.json").read_text())["max_seq_length"] == 1024


def test_extending_twice_gives_the_weights_of_extending_once(tmp_path):
    source = tiny_text_checkpoint()  # built (on first use, from the global generator) before the seeds below
    torch.manual_seed(0)
    once = hf_effattn.EffAttnRobertaModel.from_pretrained(source, attention_type="linformer", max_length=80)
    torch.manual_seed(0)
    convert(source, "linformer", tmp_path / "50", task="base", max_length=50)
    twice = hf_effattn.EffAttnRobertaModel.from_pretrained(tmp_path / "50", max_length=80)
    assert once.state_dict().keys() == twice.state_dict().keys()
    for name, weight in once.state_dict().items():
        assert torch.equal(weight, twice.state_dict()[name]), name
    rows = twice.embeddings.position_embeddings.weight
    first = 2  # RoBERTa's rows 0 and 1 are reserved
    assert torch.equal(rows[first + 50], rows[first + 50 - MAX_LENGTH])  # token 50 takes row 18, as extended once


def test_the_learned_length_is_the_block_a_table_repeats_exactly():
    table = torch.randn(5, 3)
    assert learned_length(table) == 5
    assert learned_length(tile_to_length(table, 12)) == 5
    trained = tile_to_length(table, 12)
    trained[5:] += 1e-3 * torch.randn(7, 3)  # trained after its extension: every row is its own
    assert learned_length(trained) == 12
    assert torch.equal(tile_to_length(tile_to_length(table, 8), 13), tile_to_length(table, 13))
