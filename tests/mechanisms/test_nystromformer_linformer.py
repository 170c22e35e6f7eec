"""Details of the baselines Nyströmformer and Linformer: Nyströmformer equals Transformers' own
``NystromformerSelfAttention`` on unpadded inputs, takes its landmarks over real tokens only, inverts by
Lemma 1's iteration (in float32 under autocast) and approaches softmax attention when every token is a
landmark; Linformer's projections are sized by the model's maximum length, which it enforces."""

from __future__ import annotations

import pytest
import torch
from transformers import NystromformerConfig
from transformers.models.nystromformer.modeling_nystromformer import NystromformerSelfAttention

import hf_effattn
from hf_effattn.modeling.attention_nystromformer import iterative_pinv, landmark_weights
from helpers.mechanisms import build, mixed_batch, random_batch
from helpers.models import text_config, vision_config
from helpers.references import reference, vanilla_reference
from helpers.tolerances import assert_float64_close


def transformers_attention(heads: int, landmarks: int, length: int, conv_kernel_size: int | None, exact: bool):
    """Transformers' Nyströmformer self-attention (float64, eval) for inputs of exactly ``length`` tokens; with
    ``exact`` its per-matrix coefficient of Z_0 (the paper's), else its default one over the whole batch."""
    config = NystromformerConfig(hidden_size=16, num_attention_heads=heads, num_landmarks=landmarks,
                                 segment_means_seq_len=length, conv_kernel_size=conv_kernel_size or 1,
                                 attention_probs_dropout_prob=0.0)
    attention = NystromformerSelfAttention(config).double().eval()
    if conv_kernel_size is None:  # its config takes no None: switch the convolution off as its forward reads it
        attention.conv_kernel_size = None
        del attention.conv
    if exact:
        attention.init_option = "exact"  # its config key for this is misspelt in the code that reads it
    return attention


@pytest.mark.parametrize("heads, batch, exact", [(2, 3, True), (1, 1, False)], ids=["exact-z0", "default-z0"])
@pytest.mark.parametrize("conv_kernel_size", [5, None], ids=["conv", "no-conv"])
def test_nystromformer_equals_transformers_without_padding(heads, batch, exact, conv_kernel_size):
    theirs = transformers_attention(heads, 4, 12, conv_kernel_size, exact)
    ours = build("nystromformer", {"num_landmarks": 4, "conv_kernel_size": conv_kernel_size}, heads=heads)
    ours.load_state_dict(theirs.state_dict())
    x, _ = random_batch([12] * batch, ["right"] * batch, 12)
    with torch.no_grad():
        assert_float64_close(ours(x).context, theirs(x)[0])
        all_real = torch.ones(batch, 12, dtype=torch.bool)
        assert_float64_close(ours(x, all_real).context, theirs(x)[0])


def test_nystromformer_landmarks_average_real_tokens_only_by_rank():
    """Real lengths 6 (left-padded) and 3 in N = 9, m = 4: ranks 0-5 fall in segments floor(4 t / 6) =
    0 0 1 2 2 3; ranks 0-2 in floor(4 t / 3) = 0 1 2, and the fourth landmark is empty."""
    mask = torch.tensor([[False] * 3 + [True] * 6, [True] * 3 + [False] * 6])
    weights, real = landmark_weights(mask, 2, 9, 4, "cpu", torch.float64)
    expected = torch.zeros(2, 4, 9, dtype=torch.float64)
    for landmark, positions in enumerate([[3, 4], [5], [6, 7], [8]]):
        expected[0, landmark, positions] = 1 / len(positions)
    for landmark in range(3):
        expected[1, landmark, landmark] = 1.0
    torch.testing.assert_close(weights, expected, atol=0, rtol=0)
    assert real.tolist() == [[True] * 4, [True, True, True, False]]


def test_iterative_pinv_converges_to_the_pseudo_inverse_and_keeps_empty_landmarks_out():
    """From the paper's Z_0 the iteration reaches ``torch.linalg.pinv``; a zero row and column (an empty
    landmark) stay zero, so the real block is inverted on its own."""
    generator = torch.Generator().manual_seed(0)
    matrix = torch.softmax(torch.randn(2, 5, 5, generator=generator, dtype=torch.float64), dim=-1)
    torch.testing.assert_close(iterative_pinv(matrix, 40), torch.linalg.pinv(matrix), atol=1e-8, rtol=0)
    padded = torch.zeros(2, 6, 6, dtype=torch.float64)
    padded[:, :5, :5] = matrix
    expected = torch.zeros_like(padded)
    expected[:, :5, :5] = iterative_pinv(matrix, 3)
    assert_float64_close(iterative_pinv(padded, 3), expected, precision=1e-12)


def test_nystromformer_with_every_token_a_landmark_approaches_softmax_attention():
    """L <= m: F = A_S = B = softmax(Q K^T / sqrt(d)), so with enough iterations the output is softmax attention."""
    attn = build("nystromformer", {"conv_kernel_size": None, "pinv_iterations": 40}, std=0.1)
    x, mask = mixed_batch()
    out = attn(x, mask).context
    for b in range(x.shape[0]):
        expected = vanilla_reference(attn, x[b][mask[b]]).context
        torch.testing.assert_close(out[b][mask[b]], expected, atol=1e-6, rtol=0)


def test_nystromformer_bfloat16_with_fewer_landmarks_than_tokens_stays_close():
    """The regime m < L (here L up to 10, m = 3) under bfloat16 autocast stays close to float32."""
    attn = build("nystromformer", {"num_landmarks": 3, "conv_kernel_size": 3}, dtype=torch.float32)
    x, mask = mixed_batch(dtype=torch.float32)
    expected = attn(x, mask).context[mask]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        actual = attn(x, mask).context[mask]
    assert ((actual.float() - expected).norm() / expected.norm()).item() <= 2e-2


@pytest.mark.parametrize("name, settings", [
    ("nystromformer", {"num_landmarks": 3, "conv_kernel_size": 3}), ("linformer", {"projected_length": 5}),
])
def test_pads_inside_a_sequence_are_skipped_by_rank(name, settings):
    """Real tokens need not be contiguous: landmarks, the convolution and E's columns follow the real tokens' ranks."""
    attn = build(name, settings)
    x = torch.randn(2, 10, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    mask = torch.tensor([[1, 0, 1, 1, 0, 0, 1, 1, 1, 0], [0, 1, 1, 1, 1, 1, 1, 1, 0, 0]], dtype=torch.bool)
    out = attn(x, mask).context
    for b, ref in enumerate(reference(attn, x, mask)):
        assert_float64_close(out[b][mask[b]], ref.context)


def test_linformer_projections_are_sized_by_the_models_maximum_length():
    """RoBERTa's positions start after its pad offset (20 - 2 = 18 tokens); ViT has its patches and [CLS] (4 + 1)."""
    text = hf_effattn.EffAttnRobertaModel(text_config("linformer", attention_config={"share_kv": False}))
    vision = hf_effattn.EffAttnViTModel(vision_config("linformer", attention_config={"projected_length": 3}))
    assert text.encoder.layer[0].attention.self.key_projection.shape == (256, 18)
    assert text.encoder.layer[0].attention.self.value_projection.shape == (256, 18)
    assert vision.encoder.layer[0].attention.self.key_projection.shape == (3, 5)
    assert not hasattr(vision.encoder.layer[0].attention.self, "value_projection")  # share_kv: F = E


def test_linformer_rejects_inputs_longer_than_max_length():
    attn = build("linformer", max_length=8)
    with pytest.raises(ValueError, match="Sequence length 9 exceeds the maximum length 8 .* 'linformer'"):
        attn(torch.randn(1, 9, 16, dtype=torch.float64))


def test_linformer_left_padded_sequence_uses_the_first_columns():
    """A sequence of 3 tokens left-padded to 10 gets columns 0-2 of E, not those at its positions; pads get zeros."""
    attn = build("linformer", {"projected_length": 4})
    mask = torch.tensor([[False] * 7 + [True] * 3])
    columns = attn.token_columns(attn.key_projection, mask, 1, 10)[0, 0]  # [k, N]
    assert torch.equal(columns[:, 7:], attn.key_projection[:, :3])
    assert torch.equal(columns[:, :7], torch.zeros(4, 7, dtype=torch.float64))
