"""Exact softmax inside aligned blocks, alone (``local`` with ``local_block``: the chunked reader) and beside every
mechanism (the mechanism as a memory across the blocks): against the explicit masked O(N^2) references of
tests/helpers/references.py, against softmax run on each chunk by itself, with the gate at zero, its parts switched
on and off, its settings' checks, and its cost (no N x N tensor)."""

from __future__ import annotations

import math

import pytest
import torch

import hf_effattn
from hf_effattn.modeling.local_settings import GATE_STARTS
from hf_effattn.models.hybrid_parts import mechanism_weights, only_part
from hf_effattn.modeling.kernel_attention import KernelAttention
from hf_effattn.modeling.local_blocks import AlignedBlocks
from helpers.mechanisms import WINDOWED, build, random_batch
from helpers import reference_checks
from helpers.reference_checks import assert_real_close

# Three sequences in N = 45: right-padded, left-padded (with a block of 8 cut short), and one shorter than a block.
LENGTHS, SIDES, LENGTH = [45, 30, 5], ["right", "left", "right"], 45
BLOCKS = {"s8": {"local_block": 8}, "s8-g1": {"local_block": 8, "global_tokens": 1},
          "s16-g3": {"local_block": 16, "global_tokens": 3}, "s1": {"local_block": 1}, "s45": {"local_block": 45}}
KERNELIZED = [name for name in WINDOWED if issubclass(hf_effattn.get_attention_class(name), KernelAttention)
              and name != "performer"]  # Performer's features are stabilised per row: no reference similarity


def blocked(name: str, settings: dict, **kwargs):
    return build(name, settings, max_length=LENGTH, **kwargs)


def assert_matches_reference(attn, lengths=LENGTHS, sides=SIDES, length=LENGTH) -> None:
    reference_checks.assert_matches_reference(attn, lengths, sides, length)


@pytest.mark.parametrize("blocks", BLOCKS)
def test_blocks_alone_equal_the_masked_softmax_reference(blocks):
    assert_matches_reference(blocked("local", BLOCKS[blocks]))


@pytest.mark.parametrize("blocks", ["s8", "s16-g3"])
@pytest.mark.parametrize("name", [name for name in WINDOWED if name != "performer"])
def test_mechanism_beside_the_blocks_equals_its_reference(name, blocks):
    """Every mechanism mixed per head by its gate, the kernelized ones too by default (the references' docstring);
    Performer's features are stabilised per query row in the fast path, so only its own
    matrix stands for it (next test)."""
    assert_matches_reference(blocked(name, BLOCKS[blocks]))


@pytest.mark.parametrize("name", KERNELIZED)
def test_a_memory_under_the_blocks_normaliser_equals_its_reference(name):
    """``shared_normaliser`` True: the kernelized memory's terms under one normaliser with the block's softmax, its
    gate starting at the kernelized mechanisms' own value."""
    attn = blocked(name, {**BLOCKS["s16-g3"], "shared_normaliser": True})
    assert attn.window.initial_mechanism_weight == GATE_STARTS["shared", "blocks"] == 1e-4
    assert_matches_reference(attn)


@pytest.mark.parametrize("name", KERNELIZED)
def test_a_memory_over_every_key_equals_its_reference(name, monkeypatch):
    monkeypatch.setattr(KernelAttention, "mechanism_outside_window", False)
    assert_matches_reference(blocked(name, {**BLOCKS["s16-g3"], "shared_normaliser": True}))


@pytest.mark.parametrize("name", KERNELIZED)
def test_a_kernelized_memory_is_mixed_by_its_gate_by_default(name):
    """Beside blocks ``shared_normaliser`` None means False: the memory normalised on its own and mixed per head,
    ``(1 - sigma) blocks + sigma mechanism``, from the mixed mechanisms' start; False gives the same model."""
    attn = blocked(name, BLOCKS["s16-g3"])
    assert attn.local.shared_normaliser is None and not attn.shares_normaliser
    assert attn.window.initial_mechanism_weight == GATE_STARTS["mixed", "blocks"] == 0.01
    gated = blocked(name, {**BLOCKS["s16-g3"], "shared_normaliser": False})
    gated.load_state_dict(attn.state_dict())
    x, mask = random_batch(LENGTHS, SIDES, LENGTH)
    torch.testing.assert_close(gated(x, mask).context, attn(x, mask).context, rtol=0, atol=0)


def chunked_softmax(attn, x: torch.Tensor, mask: torch.Tensor, size: int) -> list[torch.Tensor]:
    """Softmax attention with ``attn``'s projections run on each sequence's real tokens cut into chunks of ``size``,
    each chunk by itself: what reading an input in chunks computes."""
    softmax = hf_effattn.build_attention("sdpa", attn.hidden_size, attn.num_heads).double().eval()
    softmax.load_state_dict({key: value for key, value in attn.state_dict().items()
                             if key.split(".")[0] in ("query", "key", "value")})
    return [torch.cat([softmax(chunk[None]).context[0] for chunk in x[b][mask[b]].split(size)])
            for b in range(x.shape[0])]


@pytest.mark.parametrize("size", [8, 45])
def test_blocks_alone_are_softmax_over_each_chunk(size):
    attn = blocked("local", {"local_block": size})
    x, mask = random_batch(LENGTHS, SIDES, LENGTH)
    assert_real_close(attn(x, mask).context, mask, chunked_softmax(attn, x, mask, size))


@pytest.mark.parametrize("name", WINDOWED)
def test_with_the_gate_at_zero_a_hybrid_is_the_chunked_reader(name):
    attn = blocked(name, {"local_block": 8})
    with torch.no_grad():
        attn.window.mechanism_logit.fill_(-math.inf)  # sigma = 0
    x, mask = random_batch(LENGTHS, SIDES, LENGTH)
    assert_real_close(attn(x, mask).context, mask, chunked_softmax(attn, x, mask, 8))


def test_without_padding_a_short_last_block_needs_no_mask():
    """Unpadded inputs take the unmasked path (the full blocks and the short last one as two batches): the same as
    the masked path that a padding mask of all ones would take."""
    attn = blocked("kerformer", {"local_block": 8})
    x = torch.randn(2, 43, attn.hidden_size, dtype=torch.float64)
    everything = torch.ones(2, 43, dtype=torch.bool)
    unmasked, masked = attn(x).context, attn.window.attend(*attn.project(x), everything, attn.dropout).context
    local_only = attn.window.attend(*attn.project(x), None, attn.dropout).context
    torch.testing.assert_close(local_only, masked, atol=1e-12, rtol=1e-12)
    with only_part(attn, "window"):
        torch.testing.assert_close(attn(x).context, attn(x, everything).context, atol=1e-12, rtol=1e-12)
    torch.testing.assert_close(unmasked, attn(x, everything).context, atol=1e-12, rtol=1e-12)


def test_the_blocks_are_views_of_the_projections_where_they_fill_the_input():
    """Where N is a multiple of S the blocks handed to the fused kernel are the projections themselves, viewed as
    ``[B n, h, S, d]`` (no copy); otherwise the last block is filled with zeros."""
    projection = torch.randn(2, 64, 4 * 8)  # [B, N, C], as a linear layer returns it
    heads = projection.view(2, 64, 4, 8).transpose(1, 2)  # [B, h, N, d], as the attention splits its heads
    blocks = AlignedBlocks(None, 64, 16, 0, "cpu", masked=False)
    split = blocks.split(heads)
    assert split.shape == (8, 4, 16, 8) and split.data_ptr() == projection.data_ptr()
    torch.testing.assert_close(split[5], heads[1, :, 16:32])  # the second block of the second sequence
    assert blocks.merge(split).data_ptr() == projection.data_ptr()
    torch.testing.assert_close(blocks.merge(split), heads, atol=0, rtol=0)
    short = AlignedBlocks(None, 60, 16, 0, "cpu", masked=False).split(heads[:, :, :60])
    assert short.shape == (8, 4, 16, 8) and short[7, :, 12:].eq(0).all()
    torch.testing.assert_close(short[7, :, :12], heads[1, :, 48:60])


@pytest.mark.parametrize("name", ["kerformer", "dba"])
def test_each_part_alone_is_the_blocks_alone_or_the_mechanism_alone(name):
    settings = {"local_block": 8, "global_tokens": 1}
    attn = blocked(name, settings)
    local = blocked("local", settings)
    local.load_state_dict({key: value for key, value in attn.state_dict().items()
                           if key.split(".")[0] in ("query", "key", "value")})
    alone = blocked(name, {})
    alone.load_state_dict({key: value for key, value in attn.state_dict().items() if not key.startswith("window.")},
                          strict=False)
    x, mask = random_batch(LENGTHS, SIDES, LENGTH)
    with only_part(attn, "window"):
        assert_real_close(attn(x, mask).context, mask, [local(x, mask).context[b][mask[b]] for b in range(3)])
    with only_part(attn, "mechanism"):
        assert_real_close(attn(x, mask).context, mask, [alone(x, mask).context[b][mask[b]] for b in range(3)])


@pytest.mark.parametrize("name", ["kerformer", "singularformer", "local"])
def test_gradients_pass_gradcheck(name):
    attn = build(name, {"local_block": 8, "global_tokens": 1}, hidden=8, max_length=30).train()
    x, mask = random_batch([30, 19], ["right", "left"], 30, width=8)
    assert torch.autograd.gradcheck(lambda hidden: attn(hidden, mask).context, (x.requires_grad_(),))


def largest_tensor(name: str, length: int) -> int:
    """The largest tensor (elements) of one training step of ``name`` beside 64-token blocks, batch 1, padded."""
    from test_memory import LargestTensor

    attn = hf_effattn.build_attention(name, 16, 2, {"local_block": 64, "global_tokens": 1},
                                      max_length=2 * length).train()
    x = torch.randn(1, length, 16, requires_grad=True)
    mask = torch.ones(1, length, dtype=torch.bool)
    mask[0, -3:] = False
    with LargestTensor() as recorder:
        out = attn(x, mask)
        (out.context.square().sum() + (0 if out.aux_loss is None else out.aux_loss)).backward()
    return recorder.numel


@pytest.mark.parametrize("name", ["local", "kerformer", "dba", "psf"])
def test_memory_grows_linearly_and_never_quadratically(name):
    small, large = largest_tensor(name, 512), largest_tensor(name, 1024)
    assert large / small <= 2.5, (small, large)
    assert large < 2 * 1024**2


@pytest.mark.parametrize("settings, message", [
    ({"local_block": 40}, "local_block=40: it must be at most the model's maximum length 16"),
    ({"local_block": 0}, "local_block=0: it must be a positive integer"),
    ({"local_block": -512}, "local_block=-512"),
    ({"local_block": 8, "local_window": 8}, "local_block=8: it must be None beside local_window=8"),
    ({"local_block": 4, "global_tokens": 5}, "global_tokens=5: it must be at most local_block=4"),
    ({"local_block": 8, "local_window_every": 2}, "local_window_every=2: it must be 1 without a local window"),
    ({"initial_mechanism_weight": 0.1}, "initial_mechanism_weight=0.1: it must be None without a local part"),
    ({"shared_normaliser": False}, "shared_normaliser=False: it must be None without a local part"),
    ({"local_block": 8, "initial_mechanism_weight": 1.0}, r"initial_mechanism_weight=1.0: it must be a finite number "
                                                          r"> 0 and < 1"),
])
def test_block_settings_are_checked_like_every_other(settings, message):
    with pytest.raises((ValueError, TypeError), match=message):
        hf_effattn.build_attention("kerformer", 16, 2, local=settings, max_length=16)
    with pytest.raises((ValueError, TypeError), match=message):  # as a model's config checks them
        hf_effattn.EffAttnRobertaConfig(attention_type="kerformer", max_position_embeddings=18, **settings)


def test_local_takes_blocks_instead_of_its_default_window():
    blocks = hf_effattn.EffAttnRobertaConfig(attention_type="local", local_block=256)
    assert (blocks.local_window, blocks.local_block) == (None, 256)
    assert hf_effattn.EffAttnRobertaConfig(attention_type="local").local_window == 128
    assert hf_effattn.build_attention("local", 16, 2).local.local_window == 128
    with pytest.raises(ValueError, match="initial_mechanism_weight=0.5: it must be None for attention_type='local'"):
        hf_effattn.build_attention("local", 16, 2, local={"local_block": 8, "initial_mechanism_weight": 0.5})
    with pytest.raises(ValueError, match="local_block=8: it must be None for attention_type='sdpa', which is exact"):
        hf_effattn.EffAttnRobertaConfig(attention_type="sdpa", local_block=8)


def test_the_gate_starts_at_its_default_or_at_the_setting():
    for name, setting, weight in (("kerformer", None, 0.01), ("dba", None, 0.01), ("dba", 0.2, 0.2)):
        model = hf_effattn.create_model(f"roberta-base/{name}", local_block=8, initial_mechanism_weight=setting,
                                        num_hidden_layers=2, hidden_size=32, num_attention_heads=2,
                                        intermediate_size=64)
        for layer in mechanism_weights(model):
            assert layer == pytest.approx([weight] * 2)
