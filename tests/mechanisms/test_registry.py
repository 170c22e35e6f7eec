"""The registry of mechanisms: names, registration, settings validation and descriptions."""

from __future__ import annotations

import dataclasses

import pytest
import torch

import hf_effattn
from hf_effattn.modeling import attention_registry
from helpers.mechanisms import MECHANISMS

CAPABILITIES = ("supports_padding_mask", "carries_state", "has_aux_loss", "needs_max_length", "uses_query_key")


@pytest.fixture
def tiny_mechanism():
    """Registers ``tiny_test`` (context = the value projection) for one test, then removes it."""

    @dataclasses.dataclass(frozen=True)
    class TinySettings(hf_effattn.AttentionSettings):
        scale: float = hf_effattn.setting(2.0, float)

    @hf_effattn.register_attention("tiny_test")
    class TinyAttention(hf_effattn.EfficientAttention):
        settings_class = TinySettings
        paper = "A tiny test mechanism"
        uses_query_key = False

        def forward(self, hidden_states, padding_mask=None, state=None, output_attentions=False):
            return hf_effattn.AttentionOutput(self.settings.scale * self.value(hidden_states))

    yield TinyAttention
    del attention_registry._REGISTRY["tiny_test"], attention_registry._SETTINGS["tiny_test"]


def test_list_attentions_in_registration_order():
    assert hf_effattn.list_attentions() == MECHANISMS


def test_register_attention_adds_a_buildable_mechanism(tiny_mechanism):
    assert hf_effattn.list_attentions() == MECHANISMS + ["tiny_test"]
    attn = hf_effattn.build_attention("tiny_test", 8, 2, {"scale": 3.0})
    assert isinstance(attn, tiny_mechanism) and attn.name == "tiny_test"
    x = torch.randn(1, 5, 8)
    torch.testing.assert_close(attn(x).context, 3.0 * attn.value(x))
    assert hf_effattn.describe_attention("tiny_test")["defaults"] == {"scale": 2.0}


def test_registering_a_taken_name_raises(tiny_mechanism):
    with pytest.raises(ValueError, match="already registered"):
        hf_effattn.register_attention("tiny_test")(type("Other", (hf_effattn.EfficientAttention,), {}))


def test_unknown_name_lists_known_names():
    with pytest.raises(ValueError, match="Unknown attention_type 'kerfomer'") as error:
        hf_effattn.build_attention("kerfomer", 16, 2)
    assert all(name in str(error.value) for name in MECHANISMS)
    assert "Did you mean 'kerformer'" in str(error.value)


def test_unknown_setting_names_it_and_lists_valid_ones():
    with pytest.raises(ValueError, match="Unknown setting.*compresed_dim") as error:
        hf_effattn.build_attention("dba", 16, 2, {"compresed_dim": 8})
    assert "Valid settings: compressed_length, compressed_dim" in str(error.value)


@pytest.mark.parametrize(
    "name, settings, hidden, heads, fragments",
    [
        ("dba", {"compressed_dim": 25}, 16, 4, ["compressed_dim=25", "multiple of num_attention_heads=4"]),
        ("dba", {"compressed_length": 0}, 16, 2, ["compressed_length=0", "positive integer"]),
        ("kerformer", {"se_mode": "bogus"}, 16, 2, ["se_mode='bogus'", "'token', 'channel', 'none'"]),
        ("kerformer", {"se_reduction": 9}, 16, 2, ["se_reduction=9", "[1, head width = 8]"]),
        ("kerformer", {"eps": 0.0}, 16, 2, ["eps=0.0", "> 0"]),
        ("singularformer", {"rank": -1}, 16, 2, ["rank=-1", "positive integer"]),
        ("singularformer", {"gamma_diagonal": -0.1}, 16, 2, ["gamma_diagonal=-0.1", ">= 0"]),
        ("psf", {"num_factors": 0}, 16, 2, ["num_factors=0", "positive integer"]),
        ("psf", {"num_links": 6}, 16, 2, ["num_links=6", "at most 5 for max_length=16"]),
        ("nystromformer", {"num_landmarks": 0}, 16, 2, ["num_landmarks=0", "positive integer"]),
        ("nystromformer", {"pinv_iterations": 0}, 16, 2, ["pinv_iterations=0", "positive integer"]),
        ("nystromformer", {"conv_kernel_size": 4}, 16, 2, ["conv_kernel_size=4", "odd positive integer", "None"]),
        ("linformer", {"projected_length": 0}, 16, 2, ["projected_length=0", "positive integer"]),
        ("linear", {"eps": -1e-6}, 16, 2, ["eps=-1e-06", "> 0"]),
        ("cosformer", {"eps": 0}, 16, 2, ["eps=0", "> 0"]),
        ("performer", {"num_features": 0}, 16, 2, ["num_features=0", "positive integer"]),
        ("performer", {"redraw_interval": 0}, 16, 2, ["redraw_interval=0", "or None for fixed features"]),
        ("performer", {"feature_seed": -1}, 16, 2, ["feature_seed=-1", "non-negative integer"]),
        ("eager", {}, 10, 3, ["hidden_size=10", "num_attention_heads=3"]),
        ("singularformer", {}, 16, 3, ["hidden_size=16", "num_attention_heads=3"]),
    ],
)
def test_invalid_values_name_the_setting_and_range(name, settings, hidden, heads, fragments):
    with pytest.raises(ValueError) as error:
        hf_effattn.build_attention(name, hidden, heads, settings, max_length=16)
    assert all(fragment in str(error.value) for fragment in fragments), str(error.value)


@pytest.mark.parametrize("name", ["psf", "kerformer", "linformer"])
def test_fixed_length_mechanisms_require_max_length(name):
    with pytest.raises(ValueError, match="needs the model's maximum length"):
        hf_effattn.build_attention(name, 16, 2)


@pytest.mark.parametrize("name", MECHANISMS)
def test_describe_attention(name):
    cls = hf_effattn.get_attention_class(name)
    description = hf_effattn.describe_attention(name)
    assert description["name"] == name and description["class"] == cls.__name__
    assert description["paper"] and description["equations"] and description["complexity"].startswith("O(")
    assert description["defaults"] == cls.settings_class().to_dict()
    assert all(type(description[flag]) is bool for flag in CAPABILITIES)


def test_capability_flags():
    flags = {name: {f for f in CAPABILITIES if hf_effattn.describe_attention(name)[f]} for name in MECHANISMS}
    assert flags == {
        "singularformer": {"supports_padding_mask", "carries_state", "has_aux_loss", "uses_query_key"},
        "kerformer": {"supports_padding_mask", "needs_max_length", "uses_query_key"},  # the default se_mode="token"
        "dba": {"supports_padding_mask", "carries_state", "uses_query_key"},
        "psf": {"supports_padding_mask", "needs_max_length"},
        "eager": {"supports_padding_mask", "uses_query_key"},
        "sdpa": {"supports_padding_mask", "uses_query_key"},
        "nystromformer": {"supports_padding_mask", "uses_query_key"},
        "linformer": {"supports_padding_mask", "needs_max_length", "uses_query_key"},
        "linear": {"supports_padding_mask", "uses_query_key"},
        "performer": {"supports_padding_mask", "uses_query_key"},
        "cosformer": {"supports_padding_mask", "uses_query_key"},
        "local": {"supports_padding_mask", "uses_query_key"},
    }


def test_describe_attention_paper_defaults():
    assert hf_effattn.describe_attention("dba")["defaults"] == {"compressed_length": 16, "compressed_dim": 24}
    singular = hf_effattn.describe_attention("singularformer")["defaults"]
    assert singular["gamma_orthogonal"] == singular["gamma_diagonal"] == 0.01 and singular["rank"] is None
    assert hf_effattn.describe_attention("kerformer")["defaults"]["se_mode"] == "token"
    assert hf_effattn.describe_attention("nystromformer")["defaults"] == {
        "num_landmarks": 64, "pinv_iterations": 6, "conv_kernel_size": 33
    }
    assert hf_effattn.describe_attention("linformer")["defaults"] == {"projected_length": 256, "share_kv": True}
    assert hf_effattn.describe_attention("performer")["defaults"] == {
        "num_features": 256, "redraw_interval": None, "feature_seed": 0
    }
    for kernelized in ("linear", "cosformer"):  # beside a local part, its terms may share the part's normaliser
        described = hf_effattn.describe_attention(kernelized)
        assert described["defaults"] == {"eps": 1e-6} and described["local_part_role"] == "kernel"
    described = hf_effattn.describe_attention("local")  # its window or blocks are the model's
    assert described["defaults"] == {} and described["local_part_role"] == "alone"
    assert hf_effattn.describe_attention("sdpa")["local_part_role"] is None
