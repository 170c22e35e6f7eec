"""The exact local window, alone (``local``) and beside every mechanism (``local_window``): its blocks against the
explicit masked O(N^2) references of tests/helpers/references.py, the limits where it becomes plain softmax, its
parts switched on and off, its settings' checks, and its cost (no N x N tensor)."""

from __future__ import annotations

import math

import pytest
import torch

import hf_effattn
from hf_effattn.modeling.hybrid_attention import HybridAttention
from hf_effattn.modeling.local_settings import GATE_STARTS
from hf_effattn.models.hybrid_parts import (
    WindowDropout, check_mechanism_weights, check_window_dropout, mechanism_weights, only_part,
)
from helpers.mechanisms import WINDOWED, build, random_batch
from helpers.memory import BatchedProducts
from helpers import reference_checks
from helpers.reference_checks import assert_real_close

# Three sequences in N = 100 (right-, left- and right-padded), so that a 32-query block has neighbours on both sides.
LENGTHS, SIDES, LENGTH = [100, 70, 37], ["right", "left", "right"], 100
WINDOWS = {"w2": {"local_window": 2}, "w7-odd": {"local_window": 7}, "w6-g1": {"local_window": 6, "global_tokens": 1},
           "w64-g3": {"local_window": 64, "global_tokens": 3}, "w100": {"local_window": 100}}


def windowed(name: str, settings: dict, **kwargs):
    return build(name, settings, max_length=LENGTH, **kwargs)


def assert_matches_reference(attn) -> None:
    reference_checks.assert_matches_reference(attn, LENGTHS, SIDES, LENGTH)


@pytest.mark.parametrize("window", WINDOWS)
def test_window_alone_equals_the_masked_softmax_reference(window):
    assert_matches_reference(windowed("local", WINDOWS[window]))


@pytest.mark.parametrize("window", ["w7-odd", "w6-g1", "w64-g3"])
@pytest.mark.parametrize("name", [name for name in WINDOWED if name != "performer"])
def test_mechanism_beside_the_window_equals_its_reference(name, window):
    """Kernelized mechanisms under one normaliser with the window, the others mixed per head (the references'
    docstring). Performer's features are stabilised per query row in the fast path, so only its own matrix can
    stand for it (next test)."""
    assert_matches_reference(windowed(name, WINDOWS[window]))


@pytest.mark.parametrize("name", ["kerformer", "linear", "cosformer"])
def test_the_summary_over_every_key_beside_the_window_runs_in_chunks_of_tokens(name):
    """Under the shared normaliser, past ``summary_chunk`` tokens the mechanism's summary over every key is summed
    over chunks (one product each, as a GPU wants): chunks of 20 of the 100 tokens, equal to the reference."""
    attn = windowed(name, WINDOWS["w6-g1"])
    attn.summary_chunk = 20
    x, mask = random_batch(LENGTHS, SIDES, LENGTH)
    with BatchedProducts() as products:
        attn(x, mask)
    assert 20 in products.inner and LENGTH not in products.inner  # a product over 20 tokens, none over all 100
    assert_matches_reference(attn)


@pytest.mark.parametrize("name", ["kerformer", "linear", "cosformer"])
def test_a_kernelized_mechanism_mixed_by_its_gate_beside_the_window_equals_its_reference(name):
    """``shared_normaliser`` False: mixed per head as the mechanisms without feature maps, from their start."""
    attn = windowed(name, {**WINDOWS["w6-g1"], "shared_normaliser": False})
    assert attn.window.initial_mechanism_weight == GATE_STARTS["mixed", "window"] == 0.5
    assert_matches_reference(attn)


@pytest.mark.parametrize("part", [{"local_window": 10, "global_tokens": 2}, {"local_block": 8, "global_tokens": 2}],
                         ids=["window", "blocks"])
@pytest.mark.parametrize("name", WINDOWED)
def test_context_is_the_attention_matrix_times_the_values(name, part):
    """Beside a window or blocks, the fast path applies exactly the matrix ``output_attentions`` returns (Performer
    included)."""
    attn = windowed(name, part)
    x, mask = random_batch(LENGTHS, SIDES, LENGTH)
    out = attn(x, mask, output_attentions=True)
    values = attn.split_heads(attn.value(x))
    assert_real_close(out.context, mask, [attn.merge_heads(out.attentions @ values)[b][mask[b]] for b in range(3)])


@pytest.mark.parametrize("name", WINDOWED)
def test_a_window_over_the_whole_input_with_the_mechanism_weighted_zero_is_sdpa(name):
    attn = windowed(name, {"local_window": LENGTH})
    with torch.no_grad():
        attn.window.mechanism_logit.fill_(-math.inf)  # sigma = 0
    softmax = hf_effattn.build_attention("sdpa", attn.hidden_size, attn.num_heads).double().eval()
    softmax.load_state_dict({key: value for key, value in attn.state_dict().items()
                             if key.split(".")[0] in ("query", "key", "value")})
    x, mask = random_batch([51, 30, 12], SIDES, 51)  # ranks at most 50 = local_window // 2 apart
    expected = softmax(x, mask).context
    assert_real_close(attn(x, mask).context, mask, [expected[b][mask[b]] for b in range(3)])


@pytest.mark.parametrize("name", WINDOWED)
def test_each_part_alone_is_the_window_alone_or_the_mechanism_alone(name):
    settings = {"local_window": 8, "global_tokens": 1}
    attn = windowed(name, settings)
    local = hf_effattn.build_attention("local", attn.hidden_size, attn.num_heads, settings).double().eval()
    local.load_state_dict({key: value for key, value in attn.state_dict().items()
                           if key.split(".")[0] in ("query", "key", "value")})
    alone = windowed(name, {})
    alone.load_state_dict({key: value for key, value in attn.state_dict().items() if not key.startswith("window.")},
                          strict=False)
    x, mask = random_batch(LENGTHS, SIDES, LENGTH)
    with only_part(attn, "window"):
        assert_real_close(attn(x, mask).context, mask, [local(x, mask).context[b][mask[b]] for b in range(3)])
    with only_part(attn, "mechanism"):
        expected = alone(x, mask).context
        assert_real_close(attn(x, mask).context, mask, [expected[b][mask[b]] for b in range(3)])
    assert attn.parts == "both"


@pytest.mark.parametrize("name", ["kerformer+window", "dba+window", "local"])
def test_gradients_pass_gradcheck(name):
    attn = build(name, hidden=8, max_length=40).train()
    x, mask = random_batch([40, 23], ["right", "left"], 40, width=8)
    assert torch.autograd.gradcheck(lambda hidden: attn(hidden, mask).context, (x.requires_grad_(),))


def largest_tensor(name: str, length: int) -> int:
    """The largest tensor (elements) of one training step of ``name`` beside a 64-token window, batch 1."""
    from test_memory import LargestTensor

    attn = hf_effattn.build_attention(name.removesuffix("+window"), 16, 2, {"local_window": 64, "global_tokens": 1},
                                      max_length=2 * length).train()
    x = torch.randn(1, length, 16, requires_grad=True)
    with LargestTensor() as recorder:
        out = attn(x, torch.ones(1, length, dtype=torch.bool))
        (out.context.square().sum() + (0 if out.aux_loss is None else out.aux_loss)).backward()
    return recorder.numel


@pytest.mark.parametrize("name", ["local", "kerformer+window", "performer+window", "dba+window", "psf+window"])
def test_memory_grows_linearly_and_never_quadratically(name):
    small, large = largest_tensor(name, 512), largest_tensor(name, 1024)
    assert large / small <= 2.5, (small, large)
    assert large < 2 * 1024**2


@pytest.mark.parametrize("settings, message", [
    ({"local_window": 40}, "local_window=40: it must be at most the model's maximum length 16"),
    ({"local_window": 0}, "local_window=0: it must be a positive integer >= 2|local_window=0"),
    ({"local_window": -4}, "local_window=-4"),
    ({"global_tokens": 1}, "global_tokens=1: it must be 0 without a local part"),
    ({"local_window": 8.0}, "local_window=8.0"),
    ({"local_window_every": 2}, "local_window_every=2: it must be 1 without a local part"),
    ({"local_block": 8, "local_window_every": 2}, "local_window_every=2: it must be 1 without a local window"),
    ({"local_window": 8, "shared_normaliser": 1}, "shared_normaliser=1"),
    ({"local_window": 8, "local_window_every": 0}, "local_window_every=0: it must be a positive integer"),
])
def test_window_settings_are_checked_like_every_other(settings, message):
    with pytest.raises((ValueError, TypeError), match=message):
        hf_effattn.build_attention("kerformer", 16, 2, local=settings, max_length=16)
    with pytest.raises((ValueError, TypeError), match=message):  # as a model's config checks them
        hf_effattn.EffAttnRobertaConfig(attention_type="kerformer", max_position_embeddings=18, **settings)


def test_the_local_part_given_among_the_mechanism_settings_is_the_models():
    """Folders saved before 0.3 keep the local part inside ``attention_config``: it is moved out, as if given apart."""
    old = hf_effattn.EffAttnRobertaConfig(attention_type="kerformer", attention_config={"local_window": 8, "eps": 1e-5})
    assert old.attention_config == {"se_mode": "token", "se_reduction": 4, "eps": 1e-5}
    assert old.local_part == hf_effattn.EffAttnRobertaConfig(attention_type="kerformer", local_window=8).local_part
    with pytest.raises(ValueError, match="local_window=16 contradicts local_window=8 in attention_config: give it once"):
        hf_effattn.EffAttnRobertaConfig(attention_type="kerformer", attention_config={"local_window": 8}, local_window=16)
    built = hf_effattn.build_attention("kerformer", 16, 2, {"local_window": 8}, max_length=16)
    assert built.local == old.local_part


def test_the_window_alone_is_in_every_layer():
    with pytest.raises(ValueError, match="local_window_every=2: it must be 1 for the local part alone"):
        hf_effattn.build_attention("local", 16, 2, local={"local_window": 8, "local_window_every": 2}, max_length=16)


@pytest.mark.parametrize("name", ["kerformer", "singularformer"])
def test_a_window_in_one_layer_of_k_leaves_the_others_to_the_mechanism_alone(name, tmp_path):
    """With ``local_window_every=2`` layers 0 and 2 of 4 are hybrids and layers 1 and 3 are the mechanism as
    published: the same outputs as the same weights in a model without a window (only the window's weights are
    absent there), and the setting survives a save and reload."""
    model = hf_effattn.create_model(f"roberta-base/{name}", local_window=8, local_window_every=2, num_hidden_layers=4,
                                    hidden_size=32, num_attention_heads=2, intermediate_size=64).eval()
    layers = [layer.attention.self for layer in model.encoder.layer]
    assert [isinstance(attn, HybridAttention) for attn in layers] == [True, False, True, False]
    weights = mechanism_weights(model)
    assert [w is None for w in weights] == [False, True, False, True] and len(weights[0]) == 2
    alone = hf_effattn.create_model(f"roberta-base/{name}", num_hidden_layers=4, hidden_size=32,
                                    num_attention_heads=2, intermediate_size=64).eval()
    for layer in (1, 3):
        alone.encoder.layer[layer].load_state_dict(model.encoder.layer[layer].state_dict())
        x = torch.randn(2, 20, 32)
        mask = torch.ones(2, 20, dtype=torch.bool)
        torch.testing.assert_close(model.encoder.layer[layer].attention.self(x, mask).context,
                                   alone.encoder.layer[layer].attention.self(x, mask).context)
    model.save_pretrained(tmp_path)
    reloaded = hf_effattn.EffAttnRobertaModel.from_pretrained(tmp_path).eval()
    assert reloaded.config.local_window_every == 2
    ids = torch.randint(5, 100, (1, 24))
    torch.testing.assert_close(reloaded(ids).last_hidden_state, model(ids).last_hidden_state)


@pytest.mark.parametrize("name", ["sdpa", "eager"])
def test_softmax_takes_no_window(name):
    with pytest.raises(ValueError, match="use attention_type='local'"):
        hf_effattn.EffAttnRobertaConfig(attention_type=name, local_window=8)
    assert hf_effattn.describe_attention(name)["local_part_role"] is None


def test_every_other_mechanism_takes_the_window_and_describes_it():
    for name in hf_effattn.list_attentions():
        role = hf_effattn.describe_attention(name)["local_part_role"]
        assert (role is None) == (name in ("sdpa", "eager"))
        config = hf_effattn.EffAttnRobertaConfig(attention_type=name, local_window=None if role in (None, "alone") else 8)
        assert config.local_window == (128 if name == "local" else None if role is None else 8)


def test_presets_and_from_pretrained_take_the_window_settings(tmp_path):
    model = hf_effattn.create_model("roberta-base/kerformer", local_window=128, global_tokens=1,
                                    num_hidden_layers=1)
    assert model.config.local_window == 128 and model.config.global_tokens == 1
    model.save_pretrained(tmp_path)
    reloaded = hf_effattn.EffAttnRobertaModel.from_pretrained(tmp_path)
    assert reloaded.config.local_part == model.config.local_part
    torch.testing.assert_close(reloaded.encoder.layer[0].attention.self.window.mechanism_logit,
                               model.encoder.layer[0].attention.self.window.mechanism_logit)
    wider = hf_effattn.EffAttnRobertaModel.from_pretrained(tmp_path, local_window=256, convert_attention=True)
    assert wider.config.local_window == 256 and wider.config.global_tokens == 1
    assert wider.config.attention_config == model.config.attention_config


def test_a_new_window_starts_at_its_documented_weight(tmp_path):
    """Kernelized mechanisms: sigma = 0.01 (one normaliser, where the mechanism's terms outnumber the window's);
    the others: 0.5 (see docs/long-inputs.md for the measurement)."""
    from helpers.models import save_source

    from transformers import RobertaModel

    save_source(RobertaModel, "roberta", tmp_path)
    for name, weight in (("kerformer", 0.01), ("dba", 0.5)):
        model = hf_effattn.EffAttnRobertaModel.from_pretrained(tmp_path, attention_type=name, local_window=6)
        for layer in mechanism_weights(model):
            assert layer == pytest.approx([weight] * 2)


def test_window_dropout_draws_depend_on_the_seed_and_step_only():
    dropout = WindowDropout(0.25, seed=3)
    draws = [dropout.drops(step) for step in range(2000)]
    assert draws == [WindowDropout(0.25, seed=3).drops(step) for step in range(2000)]
    assert 0.2 < sum(draws) / len(draws) < 0.3
    assert not any(WindowDropout(0.0).drops(step) for step in range(100))
    with pytest.raises(ValueError, match=r"window_dropout=1.0: it must be a share of the steps in \[0, 1\)"):
        WindowDropout(1.0)


def test_window_dropout_needs_a_window():
    model = hf_effattn.EffAttnRobertaModel(hf_effattn.create_config("roberta-base/kerformer", num_hidden_layers=1))
    with pytest.raises(ValueError, match="this 'kerformer' model has none: set local_window"):
        check_window_dropout(model, 0.25)
    check_window_dropout(model, 0.0)


def test_a_mechanism_weight_that_is_no_number_is_caught_and_named():
    model = hf_effattn.create_model("roberta-base/kerformer", local_window=16, num_hidden_layers=2)
    check_mechanism_weights(model)
    with torch.no_grad():
        model.encoder.layer[1].attention.self.window.mechanism_logit[3] = math.nan
    with pytest.raises(FloatingPointError, match="of layer 1 .*lower the learning rate"):
        check_mechanism_weights(model)


PICKLED_HYBRID = """
import pickle, sys, torch
model, ids, expected = pickle.loads(sys.stdin.buffer.read())
assert torch.equal(model(ids).last_hidden_state, expected)
print(type(model.encoder.layer[0].attention.self).__name__)
"""


@pytest.mark.parametrize("part", [{"local_window": 8}, {"local_block": 8, "shared_normaliser": True}])
def test_a_hybrid_model_pickles_and_loads_in_a_fresh_process(part):
    """Its attention classes are built at run time: pickled by the classes they are built from (``torch.save`` of a
    whole model, multiprocessing), they load where none was built yet, with the same outputs."""
    import pickle
    import subprocess
    import sys

    model = hf_effattn.create_model("roberta-base/kerformer", num_hidden_layers=1, hidden_size=32,
                                    num_attention_heads=2, intermediate_size=32, **part).eval()
    ids = torch.randint(3, 100, (1, 12))
    with torch.no_grad():
        expected = model(ids).last_hidden_state
    result = subprocess.run([sys.executable, "-c", PICKLED_HYBRID], input=pickle.dumps((model, ids, expected)),
                            capture_output=True, timeout=300)
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    assert result.stdout.decode().strip() == type(model.encoder.layer[0].attention.self).__name__
