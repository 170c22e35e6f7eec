"""Paper details of each mechanism, one test each: Singularformer's aux losses, residual scores and pooling
order; DBA's Z flowing between layers; Kerformer's SE-K modes and length limits; PSF's Chord links and
initial factors."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

import hf_effattn
from hf_effattn.modeling.attention_psf import chord_links
from helpers.mechanisms import build, mixed_batch, pad
from helpers.references import reference
from helpers.tolerances import FLOAT64, assert_float64_close

def close(actual, expected, precision=FLOAT64):
    """Equal up to ``precision`` relative to the values' size (:func:`~helpers.tolerances.assert_float64_close`)."""
    assert_float64_close(actual, expected, precision)


# Singularformer


def test_singularformer_aux_loss_is_eqs_15_to_17_in_training_only():
    attn = build("singularformer", {"gamma_orthogonal": 0.3, "gamma_diagonal": 0.7})
    x, mask = mixed_batch()
    assert attn.eval()(x, mask).aux_loss is None
    expected = torch.stack([ref.aux_loss for ref in reference(attn, x, mask)]).mean()  # pads never exist there
    close(attn.train()(x, mask).aux_loss, expected)


def test_singularformer_second_layer_scores_add_the_first_layers():
    first, second = build("singularformer"), build("singularformer", layer_idx=1, seed=1)
    x, mask = mixed_batch()
    first_scores = first(x, mask).state
    own_scores = torch.stack([ref.state for ref in reference(second, x, mask)])
    close(second(x, mask, state=first_scores).state, own_scores + first_scores)


def test_singularformer_without_residual_attention_carries_no_state():
    attn = build("singularformer", {"residual_attention": False})
    x, mask = mixed_batch()
    out = attn(x, mask)
    assert out.state is None
    ignored = torch.randn(x.shape[0], attn.num_heads, attn.rank, attn.rank, dtype=x.dtype)
    close(attn(x, mask, state=ignored).context, out.context, precision=0)


def test_singularformer_pooling_before_or_after_projection_agree():
    before = build("singularformer", {"pool_before_projection": True})
    after = build("singularformer", {"pool_before_projection": False})
    x, mask = mixed_batch()
    for name, tensor in before.state_dict().items():
        assert torch.equal(tensor, after.state_dict()[name])
    close(before(x, mask).context[mask], after(x, mask).context[mask], precision=1e-12)


# DBA


def test_dba_only_the_first_layer_owns_z():
    first, later = build("dba"), build("dba", layer_idx=1)
    first_names = {name for name, _ in first.named_parameters()}
    assert first_names - {name for name, _ in later.named_parameters()} == {"compression_input"}
    assert first.compression_input.shape == (first.settings.compressed_length, first.hidden_size)


def test_dba_later_layer_without_state_raises():
    x, mask = mixed_batch()
    with pytest.raises(ValueError, match="DBA layer 1 needs the previous layer's compressed queries"):
        build("dba", layer_idx=1)(x, mask)


def test_dba_z_flows_from_layer_to_layer():
    """Layer 0 compresses with its parameter Z and hands on its compressed queries ``W_r Q``
    ``[B, d_p, C]``; layer 1 compresses with exactly those."""
    first, second = build("dba"), build("dba", layer_idx=1, seed=1)
    x, mask = mixed_batch()
    state = first(x, mask).state
    assert state.shape == (x.shape[0], first.settings.compressed_length, first.hidden_size)
    close(state, torch.stack([ref.state for ref in reference(first, x, mask)]))
    with torch.no_grad():
        first.compression_input.mul_(2)
    assert not torch.allclose(first(x, mask).state, state)  # layer 0's Z is its parameter
    context = second(x, mask, state=state).context
    for b, ref in enumerate(reference(second, x, mask, state)):
        close(context[b][mask[b]], ref.context)
    assert not torch.allclose(second(x, mask, state=2 * state).context, context)


# Kerformer


def test_kerformer_se_modes_differ():
    """Same Q, K, V weights, three SE-K modes, three different outputs (each mode's match with its own
    reference is the ``kerformer-*`` cases of test_mechanisms_reference.py)."""
    x, mask = mixed_batch()
    outputs = [build("kerformer", {"se_mode": mode})(x, mask).context[mask] for mode in ("token", "channel", "none")]
    for i, j in ((0, 1), (0, 2), (1, 2)):
        assert not torch.allclose(outputs[i], outputs[j])


def test_kerformer_token_mode_weights_real_tokens_by_rank_under_left_padding():
    """With SE-K weights that change steeply with position, a left-padded sequence still gets the
    weights of positions 0..L-1 (its real-token ranks), not of its absolute positions."""
    attn = build("kerformer", {"se_mode": "token"})
    with torch.no_grad():
        attn.se_expand.bias.copy_(torch.linspace(-6, 6, attn.max_length))
    length, padded = 5, 12
    weights = torch.sigmoid(attn.se_expand.bias)
    assert not torch.allclose(weights[:length], weights[padded - length : padded], atol=0.1)
    sequence = torch.randn(length, attn.hidden_size, dtype=torch.float64)
    x, mask = pad([sequence], ["left"], padded)
    alone = attn(sequence[None]).context[0]
    close(attn(x, mask).context[0][mask[0]], alone)
    close(alone, reference(attn, sequence[None], torch.ones(1, length, dtype=torch.bool))[0].context)


def test_kerformer_token_mode_rejects_inputs_longer_than_max_length():
    attn = build("kerformer", {"se_mode": "token"}, max_length=8)
    with pytest.raises(ValueError, match="Sequence length 9 exceeds the maximum length 8"):
        attn(torch.randn(1, 9, attn.hidden_size, dtype=torch.float64))


@pytest.mark.parametrize("max_length", [None, 8])
def test_kerformer_channel_mode_has_no_length_limit(max_length):
    attn = build("kerformer", {"se_mode": "channel"}, max_length=max_length)
    assert not attn.needs_max_length
    x, mask = pad([torch.randn(30, attn.hidden_size, dtype=torch.float64)], ["left"], 40)
    close(attn(x, mask).context[mask], reference(attn, x, mask)[0].context)


# PSF


def test_psf_chord_links_per_sequence():
    """K = 4 links (offsets 0, 1, 2, 4) in N = 6: a right-padded sequence of 3, a left-padded one of 5
    (real positions 1..5), an unpadded one of 6. Links wrap modulo the real length."""
    mask = torch.tensor([[1, 1, 1, 0, 0, 0], [0, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1]], dtype=torch.bool)
    expected = [
        [[0, 1, 2, 1], [1, 2, 0, 2], [2, 0, 1, 0]],
        [[1, 2, 3, 5], [2, 3, 4, 1], [3, 4, 5, 2], [4, 5, 1, 3], [5, 1, 2, 4]],
        [[0, 1, 2, 4], [1, 2, 3, 5], [2, 3, 4, 0], [3, 4, 5, 1], [4, 5, 0, 2], [5, 0, 1, 3]],
    ]
    links = chord_links(mask, 3, 6, 4, "cpu")
    for b, rows in enumerate(expected):
        assert links[b][mask[b]].tolist() == rows
    assert torch.gather(mask, 1, links.view(3, -1)).all()  # no row, not even a pad's, links to a pad


def test_psf_initial_factors_average_their_links():
    """As built, each factor weighs its K links 1/K each (the paper's starting point for its non-parametric
    factors), up to the small noise of the MLPs; without that noise the implied attention is the M-th power
    of the Chord averaging matrix (row-stochastic)."""
    torch.manual_seed(0)
    attn = hf_effattn.build_attention("psf", 16, 2, max_length=16).double().eval()
    x = torch.randn(1, 16, 16, dtype=torch.float64)
    weights = attn.factor_weights(x)
    close(weights, torch.full_like(weights, 1 / attn.num_links), precision=0.05)
    with torch.no_grad():
        attn.factor_out_weight.zero_()
    averaging = torch.zeros(16, 16, dtype=torch.float64)
    for row, links in enumerate(chord_links(None, 1, 16, attn.num_links, "cpu")[0].tolist()):
        for column in links:
            averaging[row, column] += 1 / attn.num_links
    probs = attn(x, output_attentions=True).attentions[0, 0]
    close(probs, torch.linalg.matrix_power(averaging, attn.num_factors))
    close(probs.sum(-1), torch.ones(16, dtype=torch.float64))


def test_psf_factor_width_is_64_by_default_and_none_keeps_the_model_width():
    """Configs saved while ``None`` was the default (the model width) still build the same shapes."""
    assert hf_effattn.build_attention("psf", 16, 2, max_length=16).factor_in_weight.shape == (4, 16, 64)
    legacy = hf_effattn.build_attention("psf", 16, 2, {"factor_hidden_size": None}, max_length=16)
    assert legacy.factor_in_weight.shape == (4, 16, 16) and legacy.factor_out_weight.shape == (4, 16, 4)


def test_psf_rejects_inputs_longer_than_max_length():
    attn = build("psf", max_length=8)
    with pytest.raises(ValueError, match="Sequence length 9 exceeds the maximum length 8"):
        attn(torch.randn(1, 9, attn.hidden_size, dtype=torch.float64))


def test_psf_has_no_query_or_key():
    attn = build("psf")
    assert not attn.uses_query_key and not hasattr(attn, "query") and not hasattr(attn, "key")
    assert not any(name.startswith(("query", "key")) for name, _ in attn.named_parameters())


# Where each mechanism's reference lives


def test_mechanisms_page_table_gives_each_mechanisms_equations_as_its_class_does():
    page = (Path(__file__).resolve().parents[2] / "docs" / "mechanisms" / "index.md").read_text()
    rows = dict(re.findall(r"^\| `([a-z_]+)` \| [^|]+ \| ([^|]+) \|", page, flags=re.MULTILINE))
    for name in hf_effattn.list_attentions():
        assert rows.get(name, "(no row)").strip() == hf_effattn.describe_attention(name)["equations"], name
