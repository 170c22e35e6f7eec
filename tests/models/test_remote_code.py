"""The ``Auto*`` classes: importing ``hf_effattn`` registers every head with its Auto class, and saved folders
are Hub-ready: for every mechanism, a text and an image model saved with ``save_pretrained`` load through
the ``Auto*`` classes with ``trust_remote_code=True`` in a fresh Python process where ``hf_effattn`` cannot
be imported, offline, and give the same outputs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch
import transformers

import hf_effattn
from hf_effattn.modeling.modeling_effattn_roberta import AUTO_CLASSES as TEXT_AUTO_CLASSES
from hf_effattn.modeling.modeling_effattn_vit import AUTO_CLASSES as VISION_AUTO_CLASSES
from helpers.models import BLOCK_PACKAGE, HYBRIDS, MECHANISMS, pixel_values, text_config, text_inputs, vision_config

LOADER = BLOCK_PACKAGE + textwrap.dedent(
    """
    import json
    import torch
    from transformers import AutoModel, AutoModelForImageClassification, AutoModelForSequenceClassification

    auto_classes = {"text": AutoModelForSequenceClassification, "vision": AutoModelForImageClassification}
    for folder, family in json.load(open("folders.json")).items():
        case = torch.load(f"{folder}/case.pt")
        for auto_class in (auto_classes[family], AutoModel):
            model = auto_class.from_pretrained(folder, trust_remote_code=True).eval()
            assert type(model).__module__.startswith("transformers_modules."), type(model).__module__
            with torch.no_grad():
                output = model(**case["inputs"])
            expected = case["logits"] if auto_class is not AutoModel else case["last_hidden_state"]
            actual = output.logits if auto_class is not AutoModel else output.last_hidden_state
            torch.testing.assert_close(actual, expected, atol=1e-5, rtol=1e-5, msg=folder)
        print("loaded", folder)
    assert not any(name.startswith("hf_effattn") for name in sys.modules)
    """
)


def save_case(model, folder, inputs) -> None:
    """Save ``model`` and, beside it, the inputs and the outputs the reloaded model must reproduce."""
    model.eval().save_pretrained(folder)
    with torch.no_grad():
        logits = model(**inputs).logits
        last_hidden_state = model.base_model(**inputs).last_hidden_state
    torch.save({"inputs": inputs, "logits": logits, "last_hidden_state": last_hidden_state}, folder / "case.pt")


def test_every_mechanism_loads_as_remote_code_without_the_package(tmp_path):
    folders = {}
    for attention_type in MECHANISMS + HYBRIDS:
        torch.manual_seed(0)
        text = hf_effattn.EffAttnRobertaForSequenceClassification(text_config(attention_type, num_labels=3))
        save_case(text, tmp_path / f"text-{attention_type}", text_inputs())
        vision = hf_effattn.EffAttnViTForImageClassification(vision_config(attention_type, num_labels=3))
        save_case(vision, tmp_path / f"vision-{attention_type}", {"pixel_values": pixel_values()})
        folders |= {f"text-{attention_type}": "text", f"vision-{attention_type}": "vision"}
    config = json.loads((tmp_path / "text-psf" / "config.json").read_text())
    assert set(config["auto_map"]) == {"AutoConfig", *TEXT_AUTO_CLASSES}
    assert (tmp_path / "text-psf" / "model.safetensors").exists()
    (tmp_path / "folders.json").write_text(json.dumps(folders))

    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env |= {"HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf_home"), "OMP_NUM_THREADS": "1"}
    result = subprocess.run(
        [sys.executable, "-I", "-c", LOADER], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert result.stdout.count("loaded") == len(folders)


@pytest.mark.parametrize("config, auto_classes", [
    (text_config("dba"), TEXT_AUTO_CLASSES), (vision_config("psf"), VISION_AUTO_CLASSES),
], ids=["text", "vision"])
def test_import_registers_every_head_with_its_auto_class(config, auto_classes):
    assert type(transformers.AutoConfig.for_model(config.model_type)) is type(config)
    for auto_class, model_class in auto_classes.items():
        assert type(getattr(transformers, auto_class).from_config(config)) is model_class


OLD_TRANSFORMERS = BLOCK_PACKAGE + textwrap.dedent(
    """
    import transformers
    from transformers.dynamic_module_utils import get_class_from_dynamic_module

    transformers.__version__ = "4.57.1"  # as an older installation reports itself
    folder = sys.argv[1]
    # The config (read first by every Auto class), and each model file alone, as a tool that skips the config would.
    for load in (lambda: transformers.AutoConfig.from_pretrained(folder, trust_remote_code=True),
                 lambda: get_class_from_dynamic_module("modeling_effattn_roberta.EffAttnRobertaModel", folder),
                 lambda: get_class_from_dynamic_module("modeling_effattn_vit.EffAttnViTModel", folder)):
        try:
            load()
        except ImportError as error:
            print(error)
    """
)


def test_remote_code_on_an_older_transformers_names_the_version_it_needs(tmp_path):
    hf_effattn.EffAttnRobertaModel(text_config("kerformer")).save_pretrained(tmp_path / "model")
    hf_effattn.EffAttnViTModel(vision_config("dba")).save_pretrained(tmp_path / "model")  # both families' files
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {
        "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf_home")}
    result = subprocess.run([sys.executable, "-c", OLD_TRANSFORMERS, str(tmp_path / "model")], env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.splitlines() == 3 * [
        "This efficient-attention model (hf_effattn) needs Transformers >=5,<6, but Transformers 4.57.1 is installed: "
        'run `pip install -U "transformers>=5,<6"`.']


def test_supported_versions_are_the_packages_requirements():
    from configparser import ConfigParser
    from pathlib import Path

    from hf_effattn.modeling.supported_versions import SUPPORTED_TORCH, SUPPORTED_TRANSFORMERS

    setup = ConfigParser()
    setup.read(Path(__file__).resolve().parents[2] / "setup.cfg")
    requirements = setup["options"]["install_requires"].split()
    assert f"transformers{SUPPORTED_TRANSFORMERS}" in requirements and f"torch{SUPPORTED_TORCH}" in requirements
