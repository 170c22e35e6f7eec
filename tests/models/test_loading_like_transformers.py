"""Loading as Transformers loads, for every model class: what Transformers' common model tests check of a load (a
saved folder's round trip, ``dtype`` and ``torch_dtype`` with ``"auto"``, a model built from ``config`` and
``state_dict``, weights of other shapes with and without ``ignore_mismatched_sizes``), written here for our classes
(``helpers.every_class``), and ``"auto"`` when converting a source checkpoint."""

from __future__ import annotations

import json

import pytest
import torch
import transformers
from safetensors.torch import load_file
from helpers.every_class import (
    assert_same_outputs, build, every_class, every_class_and_mechanism, inputs_for, is_vision, outputs_of,
)
from helpers.models import TEXT, VISION, save_source

import hf_effattn

SOURCES = {"roberta": (transformers.RobertaForMaskedLM, hf_effattn.EffAttnRobertaForMaskedLM, "kerformer"),
           "bert": (transformers.BertForMaskedLM, hf_effattn.EffAttnRobertaForMaskedLM, "dba"),
           "vit": (transformers.ViTModel, hf_effattn.EffAttnViTModel, "singularformer")}


def saved(model, folder):
    model.save_pretrained(folder)
    return folder


def floating_dtypes(model) -> set[torch.dtype]:
    return {tensor.dtype for tensor in model.state_dict().values() if tensor.is_floating_point()}


def saved_dtype(folder) -> str:
    return json.loads((folder / "config.json").read_text())["dtype"]


@pytest.mark.parametrize("model_class, mechanism", every_class_and_mechanism())
def test_a_saved_model_loads_with_its_outputs_from_safetensors(tmp_path, model_class, mechanism):
    model = build(model_class, mechanism)
    reloaded = model_class.from_pretrained(saved(model, tmp_path))
    assert sorted(path.name for path in tmp_path.glob("*.safetensors")) == ["model.safetensors"]
    assert not list(tmp_path.glob("*.bin")) and not list(tmp_path.glob("*.pt"))
    inputs = inputs_for(model_class)
    assert_same_outputs(outputs_of(reloaded, inputs), outputs_of(model, inputs), atol=0, rtol=0)


@pytest.mark.parametrize("argument", ["dtype", "torch_dtype"])
@pytest.mark.parametrize("model_class, mechanism", every_class())
def test_auto_keeps_the_saved_dtype_and_never_reaches_the_config(tmp_path, model_class, mechanism, argument):
    model = build(model_class, mechanism).to(torch.bfloat16)
    reloaded = model_class.from_pretrained(saved(model, tmp_path / "saved"), **{argument: "auto"})
    assert floating_dtypes(reloaded) == {torch.bfloat16} and reloaded.config.dtype == torch.bfloat16
    inputs = inputs_for(model_class)
    assert_same_outputs(outputs_of(reloaded, inputs), outputs_of(model, inputs), atol=0, rtol=0)
    assert saved_dtype(saved(reloaded, tmp_path / "again")) == "bfloat16"


@pytest.mark.parametrize("argument", ["dtype", "torch_dtype"])
@pytest.mark.parametrize("model_class, mechanism", every_class())
def test_a_dtype_casts_the_saved_weights(tmp_path, model_class, mechanism, argument):
    model = build(model_class, mechanism)
    reloaded = model_class.from_pretrained(saved(model, tmp_path), **{argument: torch.float64})
    assert floating_dtypes(reloaded) == {torch.float64} and reloaded.config.dtype == torch.float64
    for name, tensor in model.state_dict().items():
        torch.testing.assert_close(reloaded.state_dict()[name], tensor.double(), atol=0, rtol=0)


@pytest.mark.parametrize("kind", SOURCES)
def test_auto_keeps_a_source_checkpoints_dtype_when_converting(tmp_path, kind):
    source_class, our_class, mechanism = SOURCES[kind]
    save_source(source_class, kind, tmp_path / "source")
    source = source_class.from_pretrained(tmp_path / "source", dtype=torch.float16)
    source.save_pretrained(tmp_path / "half")
    assert saved_dtype(tmp_path / "half") == "float16"
    converted = our_class.from_pretrained(tmp_path / "half", dtype="auto", attention_type=mechanism)
    assert floating_dtypes(converted) == {torch.float16} and converted.config.dtype == torch.float16
    assert saved_dtype(saved(converted, tmp_path / "ours")) == "float16"


@pytest.mark.parametrize("model_class, mechanism", every_class_and_mechanism())
def test_config_and_state_dict_build_the_model_without_a_folder(model_class, mechanism):
    model = build(model_class, mechanism)
    rebuilt = model_class.from_pretrained(None, config=model.config, state_dict=model.state_dict())
    inputs = inputs_for(model_class)
    assert_same_outputs(outputs_of(rebuilt, inputs), outputs_of(model, inputs), atol=0, rtol=0)


def test_a_state_dict_without_its_config_is_refused():
    model = build(hf_effattn.EffAttnRobertaModel, "kerformer")
    with pytest.raises(ValueError, match=r"from_pretrained\(None, \.\.\.\) builds the model from weights in memory: "
                                         r"pass the model's config \(config=\.\.\.\)"):
        hf_effattn.EffAttnRobertaModel.from_pretrained(None, state_dict=model.state_dict())


def other_shape(model_class) -> dict:
    """A config value that changes the shape of some of ``model_class``'s weights: the vocabulary of a text model,
    the channels of an image."""
    return {"num_channels": VISION["num_channels"] + 1} if is_vision(model_class) else \
        {"vocab_size": TEXT["vocab_size"] + 1}


@pytest.mark.parametrize("model_class, mechanism", every_class())
def test_other_shapes_raise_the_runtime_error_of_transformers(tmp_path, model_class, mechanism):
    folder = saved(build(model_class, mechanism), tmp_path)
    with pytest.raises(RuntimeError, match="have other shapes in this model.*Pass ignore_mismatched_sizes=True"):
        model_class.from_pretrained(folder, **other_shape(model_class))


@pytest.mark.parametrize("model_class, mechanism", every_class())
def test_ignore_mismatched_sizes_initialises_the_other_shapes_and_loads_the_rest(tmp_path, model_class, mechanism):
    model = build(model_class, mechanism)
    loaded, info = model_class.from_pretrained(saved(model, tmp_path), ignore_mismatched_sizes=True,
                                               output_loading_info=True, **other_shape(model_class))
    mine, theirs = loaded.state_dict(), model.state_dict()
    reshaped = {name for name in mine if mine[name].shape != theirs[name].shape}
    stored = load_file(tmp_path / "model.safetensors").keys()  # a tied weight is stored once, under one name
    assert reshaped and reshaped & stored == {name for name, *_ in info["mismatched_keys"]}
    for name in mine.keys() - reshaped:
        torch.testing.assert_close(mine[name], theirs[name], atol=0, rtol=0)
    assert all(getattr(loaded.config, name) == value for name, value in other_shape(model_class).items())
