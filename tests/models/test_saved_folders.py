"""Nothing saved before breaks: folders written by earlier versions of the package (``tests/fixtures/saved_folders/``,
made by its ``make.py`` from the version's own commit: 0.1.0, and main before the model code's redesign) load with
today's classes and give the outputs that version's code gave, within 1e-5, for every mechanism, text and image,
beside a window or aligned blocks, and from a preset; and such a folder converts again to another mechanism."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModel, AutoModelForImageClassification, AutoModelForSequenceClassification

import hf_effattn

FIXTURES = Path(__file__).parents[1] / "fixtures" / "saved_folders"
FOLDERS = sorted(path for path in FIXTURES.glob("*/*") if path.is_dir())
HEADS = {"text": AutoModelForSequenceClassification, "vision": AutoModelForImageClassification}


def test_the_fixtures_cover_every_version_and_case():
    versions = {path.parent.name for path in FOLDERS}
    assert versions == {"0.1.0", "main-45c6a41"}
    names = {path.name for path in FOLDERS if path.parent.name == "main-45c6a41"}
    for mechanism in ("singularformer", "kerformer", "dba", "psf", "sdpa"):
        assert {f"text-{mechanism}", f"vision-{mechanism}"} <= names
    assert {"text-kerformer+window", "text-kerformer+blocks", "vision-singularformer+blocks",
            "text-preset-roberta-base-kerformer"} <= names


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda path: f"{path.parent.name}/{path.name}")
def test_a_folder_saved_before_loads_with_its_outputs(folder):
    expected = load_file(folder / "expected.safetensors")
    inputs = {name: expected[name] for name in ("input_ids", "attention_mask", "pixel_values") if name in expected}
    head = HEADS[folder.name.split("-")[0]].from_pretrained(folder).eval()
    base = AutoModel.from_pretrained(folder).eval()
    assert type(head).__module__.startswith("hf_effattn.modeling")
    with torch.no_grad():
        torch.testing.assert_close(head(**inputs).logits, expected["logits"], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(base(**inputs).last_hidden_state, expected["last_hidden_state"], atol=1e-5,
                                   rtol=1e-5)


@pytest.mark.parametrize("version", ["0.1.0", "main-45c6a41"])
def test_a_folder_saved_before_converts_to_another_mechanism(version, tmp_path):
    """The old Kerformer folder becomes a DBA one: every weight they share is kept (the embeddings, the projections,
    the feed-forward layers), and the new folder loads with the same outputs as the converted model."""
    source = FIXTURES / version / "text-kerformer"
    model = hf_effattn.convert(str(source), "dba", tmp_path / "dba", convert_attention=True)
    old = AutoModelForSequenceClassification.from_pretrained(source)
    kept = ("embeddings.word_embeddings.weight", "encoder.layer.1.attention.self.value.weight",
            "encoder.layer.0.output.dense.weight")
    for name in kept:
        assert torch.equal(model.base_model.get_parameter(name), old.base_model.get_parameter(name)), name
    reloaded = AutoModelForSequenceClassification.from_pretrained(tmp_path / "dba").eval()
    assert reloaded.config.attention_type == "dba"
    inputs = {name: tensor for name, tensor in load_file(source / "expected.safetensors").items()
              if name in ("input_ids", "attention_mask")}
    with torch.no_grad():
        torch.testing.assert_close(reloaded(**inputs).logits, model.eval()(**inputs).logits)
