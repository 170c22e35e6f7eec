"""Padding safety (float32): a sequence gives the same real outputs alone or right- or left-padded in a
batch, through two layers so that the cross-layer state is covered too; pads never contribute."""

from __future__ import annotations

import pytest
import torch

from helpers.mechanisms import HYBRIDS, MECHANISMS, build, mixed_batch, pad

ATOL = 1e-5


def two_layers(name: str):
    """Layers 0 and 1 of mechanism ``name`` (float32, different weights)."""
    return [build(name, dtype=torch.float32, layer_idx=i, seed=i) for i in range(2)]


def run(layers, x: torch.Tensor, mask: torch.Tensor | None):
    """Run ``layers`` in sequence (each layer's context is the next one's input, the state flows).
    Returns the last context ``[B, N, C]`` and the summed aux losses (or None)."""
    state, aux_loss = None, None
    for layer in layers:
        out = layer(x, mask, state)
        x, state = out.context, out.state
        if out.aux_loss is not None:
            aux_loss = out.aux_loss if aux_loss is None else aux_loss + out.aux_loss
    return x, aux_loss


@pytest.mark.parametrize("side", ["right", "left"])
@pytest.mark.parametrize("name", MECHANISMS + HYBRIDS)
def test_alone_equals_padded_in_a_batch(name, side):
    layers = two_layers(name)
    generator = torch.Generator().manual_seed(0)
    sequences = [torch.randn(n, 16, generator=generator) for n in (7, 12, 3)]
    alone, _ = run(layers, sequences[0][None], None)
    x, mask = pad(sequences, [side, "right", "left"], 12)
    batched, _ = run(layers, x, mask)
    torch.testing.assert_close(batched[0][mask[0]], alone[0], atol=ATOL, rtol=0)


@pytest.mark.parametrize("training", [False, True], ids=["eval", "train"])
@pytest.mark.parametrize("name", MECHANISMS + HYBRIDS)
def test_pads_never_contribute(name, training):
    """Real outputs are bit-for-bit unchanged when pad inputs change, and a loss on real outputs (plus
    the aux loss in training) has exactly zero gradient at pad inputs."""
    layers = [layer.train(training) for layer in two_layers(name)]
    x, mask = mixed_batch(dtype=torch.float32)
    perturbed = torch.where(mask[..., None], x, 100 * torch.randn_like(x)).requires_grad_()
    reference_output, _ = run(layers, x, mask)
    output, aux_loss = run(layers, perturbed, mask)
    assert torch.equal(output[mask], reference_output[mask])
    loss = (output[mask] * torch.randn_like(output[mask])).sum() + (0 if aux_loss is None else aux_loss)
    loss.backward()
    assert torch.all(perturbed.grad[~mask] == 0)
    assert torch.any(perturbed.grad[mask] != 0)
