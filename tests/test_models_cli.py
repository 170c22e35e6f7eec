"""The ``list`` and ``convert`` subcommands."""

from __future__ import annotations

import argparse
import json

import torch
import transformers

import hf_effattn
from hf_effattn import conversion, listing
from models_helpers import save_source, text_inputs


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
    model = hf_effattn.EffAttnRobertaForTokenClassification.from_pretrained(tmp_path / "out")
    torch.testing.assert_close(model.classifier.weight, source.classifier.weight)
    assert model(**text_inputs()).logits.shape == (3, 9, 2)
