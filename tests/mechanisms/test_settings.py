"""Every setting is checked for its type and range, from keyword arguments and from a hand-edited ``config.json``:
each mechanism's settings (declared with their spec) and the config values the models rely on."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

import hf_effattn
from hf_effattn.modeling.attention_settings import AttentionSettings
from helpers.models import text_config, vision_config

# Values of the wrong kind for each declared kind (a bool is never a number, a string never a bool).
WRONG_KINDS = {bool: ["false", 1, None], int: [True, 2.5, "4"], float: [True, "abc"], str: [3, True]}
OUT_OF_RANGE = {float: [math.inf, math.nan]}


def declared_settings():
    """``(mechanism, field)`` for every setting of every registered mechanism."""
    return [
        (name, field)
        for name in hf_effattn.list_attentions()
        for field in dataclasses.fields(hf_effattn.get_attention_class(name).settings_class)
    ]


@pytest.mark.parametrize(
    "attention_type, attention_config, error, match",
    [
        ("singularformer", {"residual_attention": "false"}, TypeError,
         r"residual_attention='false' \(str\): it must be a bool, True or False .*\(default: True\)"),
        ("singularformer", {"pool_before_projection": 0}, TypeError, r"pool_before_projection=0 \(int\)"),
        ("kerformer", {"se_reduction": True}, TypeError, r"se_reduction=True \(bool\): it must be a positive integer"),
        ("kerformer", {"eps": math.inf}, ValueError, r"eps=inf: it must be a finite number > 0 \(default: 1e-06\)"),
        ("kerformer", {"eps": "abc"}, TypeError, r"eps='abc' \(str\): it must be a finite number > 0"),
        ("kerformer", {"se_mode": "chanel"}, ValueError, r"se_mode='chanel': it must be one of 'token', 'channel'"),
        ("psf", {"num_links": 0}, ValueError, r"num_links=0: it must be a positive integer, or None for ceil"),
        ("dba", {"compressed_length": 1.5}, TypeError, r"compressed_length=1.5 \(float\)"),
        ("dba", "abc", TypeError, r"attention_config='abc': it must be a dict of 'dba' settings, or None"),
        (None, None, TypeError, r"attention_type=None: it must be a string, one of singularformer, kerformer"),
    ],
)
def test_the_issue_examples_are_refused_clearly(attention_type, attention_config, error, match):
    for make in (text_config, vision_config):
        with pytest.raises(error, match=match):
            make(attention_type, attention_config=attention_config)


@pytest.mark.parametrize("name, field", declared_settings(), ids=lambda x: getattr(x, "name", x))
def test_every_setting_declares_its_kind_and_refuses_others(name, field):
    """Covers mechanisms added later too: each declares a spec, and values of another kind (or not finite) raise."""
    assert "spec" in field.metadata, f"{name}.{field.name} is not declared with setting(...)"
    spec = field.metadata["spec"]
    settings_class = hf_effattn.get_attention_class(name).settings_class
    built = getattr(settings_class(), field.name)
    assert built == field.default or (field.default is None and built is not None and spec.none_means)  # resolved
    wrong = [value for value in WRONG_KINDS[spec.kind] if value is not None or spec.none_means is None]
    for value in wrong:
        with pytest.raises(TypeError, match=rf"Invalid attention setting {field.name}={value!r} \("):
            hf_effattn.build_attention(name, 16, 2, {field.name: value}, max_length=16)
    for value in OUT_OF_RANGE.get(spec.kind, []):
        with pytest.raises(ValueError, match=rf"Invalid attention setting {field.name}={value!r}: it must be"):
            hf_effattn.build_attention(name, 16, 2, {field.name: value}, max_length=16)


def test_a_setting_without_a_spec_is_refused():
    @dataclasses.dataclass(frozen=True)
    class Undeclared(AttentionSettings):
        size: int = 3

    with pytest.raises(TypeError, match=r"Undeclared.size has no declared type and range: declare it with setting"):
        Undeclared()


def test_numbers_are_stored_as_their_declared_kind():
    """JSON writes 0.0 as 0, numpy gives np.int64: accepted and stored as float / int, so they save as before."""
    config = text_config("singularformer", attention_config={"gamma_orthogonal": 0, "rank": np.int64(4)})
    assert config.attention_config["gamma_orthogonal"] == 0.0
    assert type(config.attention_config["gamma_orthogonal"]) is float and type(config.attention_config["rank"]) is int
    settings = hf_effattn.build_settings("kerformer", {"eps": np.float32(1e-3)})
    assert type(settings.eps) is float


def test_shape_dependent_settings_name_the_limit():
    with pytest.raises(ValueError, match=r"se_reduction=16: it must be an integer in \[1, head width = 8\]"):
        text_config("kerformer", attention_config={"se_reduction": 16})
    with pytest.raises(ValueError, match=r"compressed_dim=3: it must be a positive multiple of num_attention_heads=2"):
        text_config("dba", attention_config={"compressed_dim": 3})


@pytest.mark.parametrize(
    "overrides, error, match",
    [
        ({"num_attention_heads": 0}, ValueError, r"num_attention_heads=0: it must be a positive integer"),
        ({"num_attention_heads": -2}, ValueError, r"num_attention_heads=-2: it must be a positive integer"),
        ({"hidden_size": 0}, ValueError, r"hidden_size=0: it must be a positive integer"),
        ({"num_hidden_layers": -1}, ValueError, r"num_hidden_layers=-1: it must be a non-negative integer"),
        ({"intermediate_size": 0}, ValueError, r"intermediate_size=0: it must be a positive integer"),
        ({"attention_probs_dropout_prob": 1.5}, ValueError, r"attention_probs_dropout_prob=1.5: .* in \[0, 1\]"),
        ({"hidden_dropout_prob": math.nan}, ValueError, r"hidden_dropout_prob=nan: it must be a finite number"),
        ({"layer_norm_eps": 0.0}, ValueError, r"layer_norm_eps=0.0: it must be a finite number > 0"),
    ],
)
def test_config_values_of_both_families(overrides, error, match):
    for make in (text_config, vision_config):
        with pytest.raises(error, match=rf"Invalid config value {match}"):
            make(**overrides)


@pytest.mark.parametrize(
    "make, overrides, error, match",
    [
        (text_config, {"roberta_positions": "false"}, TypeError,
         r"roberta_positions='false' \(str\): it must be a bool"),
        (text_config, {"roberta_positions": 0}, TypeError, r"roberta_positions=0 \(int\): it must be a bool"),
        (text_config, {"pad_token_id": None}, TypeError, r"pad_token_id=None \(NoneType\): .* roberta_positions=False"),
        (text_config, {"max_position_embeddings": 2}, ValueError,
         r"max_position_embeddings=2 leaves no position .* must be at least 3"),
        (text_config, {"vocab_size": 0}, ValueError, r"vocab_size=0: it must be a positive integer"),
        (vision_config, {"patch_size": 16}, ValueError, r"patch_size=16 is larger than image_size=8"),
        (vision_config, {"image_size": 0}, ValueError, r"image_size=0: it must be a positive integer"),
        (vision_config, {"num_channels": 0}, ValueError, r"num_channels=0: it must be a positive integer"),
    ],
)
def test_config_values_of_each_family(make, overrides, error, match):
    with pytest.raises(error, match=match):
        make(**overrides)


def test_valid_edge_values_are_accepted():
    assert text_config(pad_token_id=None, roberta_positions=False).attention_max_length == 20
    assert text_config(attention_probs_dropout_prob=1, hidden_dropout_prob=0, num_hidden_layers=0)
    assert vision_config(image_size=(8, 12), patch_size=(4, 4)).attention_max_length == 7


def test_a_layer_built_directly_checks_its_heads():
    with pytest.raises(ValueError, match=r"Invalid config value num_attention_heads=0: it must be a positive integer"):
        hf_effattn.build_attention("kerformer", 16, 0, max_length=16)


@pytest.mark.parametrize(
    "edit, error, match",
    [
        ({"attention_config": {"residual_attention": "false"}}, TypeError, r"residual_attention='false' \(str\)"),
        ({"attention_config": {"gamma_diagonal": -1}}, ValueError,
         r"gamma_diagonal=-1: it must be a finite number >= 0"),
        ({"num_attention_heads": 0}, ValueError, r"num_attention_heads=0: it must be a positive integer"),
        ({"roberta_positions": "false"}, TypeError, r"roberta_positions='false' \(str\)"),
        ({"attention_type": None}, TypeError, r"attention_type=None: it must be a string"),
    ],
)
def test_a_hand_edited_config_json_is_checked_on_load(tmp_path, edit, error, match):
    hf_effattn.EffAttnRobertaModel(text_config("singularformer")).save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    for key, value in edit.items():
        config[key] = {**config[key], **value} if isinstance(value, dict) else value
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(error, match=match):
        hf_effattn.EffAttnRobertaConfig.from_pretrained(tmp_path)
    with pytest.raises(error, match=match):
        hf_effattn.EffAttnRobertaModel.from_pretrained(tmp_path)


def test_the_local_parts_written_out_defaults_are_its_fields():
    """``LOCAL_PART_DEFAULTS`` is written out for the code of folders without a local part (``remote_code.py``)."""
    from hf_effattn.modeling.local_settings import LOCAL_PART_DEFAULTS, LocalPartSettings

    assert LOCAL_PART_DEFAULTS == {field.name: field.default for field in dataclasses.fields(LocalPartSettings)}
