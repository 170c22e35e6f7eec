"""The ``list`` and ``convert`` subcommands."""

from __future__ import annotations

import argparse
import json

import torch
import transformers

import hf_effattn
from hf_effattn import conversion, listing
from models_helpers import save_source, text_config, text_inputs


def run(module, argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    module.add_arguments(parser)
    return module.run(parser.parse_args(argv))


def test_list(capsys):
    assert run(listing, ["lra-*/psf"]) == 0
    out = capsys.readouterr().out
    assert "kerformer" in out and "lra-listops/psf" in out and "roberta-base/psf" not in out
    run(listing, ["--attentions"])
    assert "presets" not in capsys.readouterr().out


def test_convert_writes_a_hub_ready_folder(tmp_path):
    source = save_source(transformers.RobertaForTokenClassification, "roberta", tmp_path / "source")
    transformers.RobertaTokenizer().save_pretrained(tmp_path / "source")
    assert run(conversion, [str(tmp_path / "source"), "--attention_type", "kerformer", "--output_dir",
                            str(tmp_path / "out"), "--attention_config", '{"se_mode": "channel"}']) == 0
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    assert config["attention_type"] == "kerformer" and config["attention_config"]["se_mode"] == "channel"
    assert config["architectures"] == ["EffAttnRobertaForTokenClassification"]  # the checkpoint's head
    assert "AutoModelForTokenClassification" in config["auto_map"]
    for name in ("model.safetensors", "modeling_effattn_roberta.py", "attention_kerformer.py", "tokenizer_config.json"):
        assert (tmp_path / "out" / name).exists(), name
    card = (tmp_path / "out" / "README.md").read_text()  # the model card, with the converted model's limitations
    assert "its new parameters are untrained: fine-tune the model" in card and "@article{gan2023kerformer," in card
    assert 'AutoModelForTokenClassification.from_pretrained("out", trust_remote_code=True)' in card
    model = hf_effattn.EffAttnRobertaForTokenClassification.from_pretrained(tmp_path / "out")
    torch.testing.assert_close(model.classifier.weight, source.classifier.weight)
    assert model(**text_inputs()).logits.shape == (3, 9, 2)


def test_convert_refuses_shape_changes_in_one_line_unless_allowed(tmp_path, capsys):
    hf_effattn.EffAttnRobertaModel(text_config("kerformer")).save_pretrained(tmp_path / "token")
    argv = [str(tmp_path / "token"), "--attention_type", "kerformer", "--attention_config", '{"se_mode": "channel"}',
            "--convert_attention", "--output_dir", str(tmp_path / "channel")]
    capsys.readouterr()
    assert run(conversion, argv) == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]  # after Transformers' load report
    assert error.startswith("hf-effattn convert: error: Some weights") and "--ignore_mismatched_sizes" in error
    assert not (tmp_path / "channel").exists()
    assert run(conversion, [*argv, "--ignore_mismatched_sizes"]) == 0
    assert json.loads((tmp_path / "channel" / "config.json").read_text())["attention_config"]["se_mode"] == "channel"


def test_converted_sentence_transformer_keeps_its_pooling_and_normalisation(tmp_path):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer

    save_source(transformers.BertModel, "bert", tmp_path / "bert")
    (tmp_path / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "c"]))
    transformers.BertTokenizer(str(tmp_path / "vocab.txt")).save_pretrained(tmp_path / "bert")
    original = SentenceTransformer(modules=[Transformer(str(tmp_path / "bert")), Pooling(16, "mean"), Normalize()])
    original.save(str(tmp_path / "st"))
    argv = [str(tmp_path / "st"), "--attention_type", "sdpa", "--output_dir", str(tmp_path / "out")]
    assert run(conversion, argv) == 0
    assert (tmp_path / "out" / "1_Pooling" / "config.json").is_file() and (tmp_path / "out" / "2_Normalize").is_dir()
    converted = SentenceTransformer(str(tmp_path / "out"), trust_remote_code=True, device="cpu")
    assert type(converted[0].model).__name__ == "EffAttnRobertaModel"
    sentences = ["a b c", "c a", "b"]
    expected = original.encode(sentences, convert_to_tensor=True)
    torch.testing.assert_close(converted.encode(sentences, convert_to_tensor=True), expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(expected.norm(dim=-1), torch.ones(3))  # the normalisation is still there
