"""A setting or config value that is not a finite number (NaN, infinity), wherever it is given: one ``ValueError``
(``TypeError`` where an integer is expected) naming the setting, before any weight is built; NaN, unequal to
itself, is never taken for two contradicting answers."""

from __future__ import annotations

import math

import pytest
from helpers.models import text_config

import hf_effattn

SMALL = dict(num_hidden_layers=1, hidden_size=32, num_attention_heads=4, intermediate_size=64, vocab_size=100)
GATE = r"Invalid attention setting initial_mechanism_weight={}: it must be a finite number > 0 and < 1"


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize("part", [{"local_block": 16}, {"local_window": 8}])
def test_a_gate_start_that_is_not_finite_is_refused_naming_it(part, value):
    with pytest.raises(ValueError, match=GATE.format(value)):
        hf_effattn.create_model("roberta-base/kerformer", **part, initial_mechanism_weight=value, **SMALL)


def test_the_same_nan_given_twice_is_refused_as_one_bad_value():
    with pytest.raises(ValueError, match=GATE.format("nan")):
        hf_effattn.create_model("roberta-base/dba", local_block=16, initial_mechanism_weight=math.nan,
                                attention_config={"initial_mechanism_weight": math.nan}, **SMALL)
    with pytest.raises(ValueError, match=r"initial_mechanism_weight=nan contradicts initial_mechanism_weight=0.2 in "
                                         r"attention_config: give it once\."):
        hf_effattn.create_model("roberta-base/dba", local_block=16, initial_mechanism_weight=math.nan,
                                attention_config={"initial_mechanism_weight": 0.2}, **SMALL)


@pytest.mark.parametrize("name", ["local_block", "local_window"])
def test_a_nan_size_of_the_local_part_is_a_type_error_naming_it(name):
    with pytest.raises(TypeError, match=rf"Invalid attention setting {name}=nan \(float\): it must be an? "
                                        r"(positive )?integer"):
        hf_effattn.create_model("roberta-base/kerformer", **{name: math.nan}, **SMALL)


def test_a_mechanism_setting_that_is_not_finite_is_refused_naming_it():
    with pytest.raises(ValueError, match=r"Invalid attention setting eps=inf: it must be a finite number > 0"):
        hf_effattn.create_model("roberta-base/kerformer", attention_config={"eps": math.inf}, **SMALL)


def test_a_nan_gate_start_is_refused_when_loading_a_saved_model(tmp_path):
    hf_effattn.EffAttnRobertaModel(text_config("kerformer", local_block=6)).save_pretrained(tmp_path)
    with pytest.raises(ValueError, match=GATE.format("nan")):
        hf_effattn.EffAttnRobertaModel.from_pretrained(tmp_path, local_block=6, initial_mechanism_weight=math.nan,
                                                       convert_attention=True)


def test_a_config_value_that_is_not_finite_is_refused_naming_it():
    with pytest.raises(ValueError, match=r"Invalid config value layer_norm_eps=nan: it must be a finite number > 0"):
        text_config("kerformer", layer_norm_eps=math.nan)
