"""Each mechanism's op (``modeling/ops_<name>.py``) equals its naive O(N^2) form in float64 on a padded batch (full,
right-padded, left-padded, one real token) and on one without padding given no mask (:data:`BATCHES`): the context
at real tokens, the state and the auxiliary loss, and the gradients of all of them to every input of the op. The
naive forms also give the independent references' results (``helpers/references.py``), from the weights of a built
layer.

Every op here reads tensors made from a built layer (:data:`OPS`: for each mechanism, its op's inputs from the layer
and the two forms, fast and naive, on them), made leaves so that the gradients reach them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import pytest
import torch

from hf_effattn.modeling.attention_base import AttentionOutput
from hf_effattn.modeling.ops_dba import dba_attention, naive_dba_attention
from hf_effattn.modeling.ops_kerformer import kerformer_attention, naive_kerformer_attention
from hf_effattn.modeling.ops_psf import naive_psf_attention, psf_attention
from hf_effattn.modeling.ops_singularformer import (
    naive_singularformer_attention, singular_vectors, singularformer_attention, singularformer_aux_loss,
)
from helpers.mechanisms import build, mixed_batch, random_batch
from helpers.references import reference
from helpers.tolerances import assert_float64_close


@dataclass
class Op:
    """A mechanism's op under test: ``inputs(attn, x, mask, state)`` -> the op's tensors (a dict) from a built layer
    and a state (the previous layer's, or None), and its two forms on them, ``fast`` and ``naive`` (each
    ``(inputs, mask, attn) -> AttentionOutput``, ``attn`` giving the settings only)."""

    inputs: Callable[..., dict]
    fast: Callable[..., AttentionOutput]
    naive: Callable[..., AttentionOutput]


def singularformer_inputs(attn, x, mask, state):
    query, key, value = attn.project(x)
    return {"query": query, "key": key, "value": value, "logits": attn.pooling(x),
            "previous_scores": state if attn.settings.residual_attention else None}


def singularformer_fast(inputs, mask, attn):
    """The layer's three steps, pooling Q, K and V (``pool_before_projection=False``)."""
    alpha_hat, alpha = singular_vectors(inputs["logits"], mask)
    pooled = [torch.matmul(alpha_hat[:, None], inputs[name]) for name in ("query", "key", "value")]
    context, scores, core = singularformer_attention(*pooled, alpha, inputs["previous_scores"])
    settings = attn.settings
    aux_loss = singularformer_aux_loss(alpha_hat, alpha, core, mask, settings.gamma_orthogonal, settings.gamma_diagonal)
    return AttentionOutput(context, scores, aux_loss)


def singularformer_naive(inputs, mask, attn):
    settings = attn.settings
    return naive_singularformer_attention(**inputs, padding_mask=mask, gamma_orthogonal=settings.gamma_orthogonal,
                                          gamma_diagonal=settings.gamma_diagonal)


def dba_inputs(attn, x, mask, state):
    query, key, value = attn.project(x)
    return {"query": query, "key": key, "value": value,
            "compression_input": attn.compression_input_of(state, x.shape[0]),
            "hidden_compression": attn.hidden_compression,
            "row_logits": attn.reconstruction(attn.row_reconstruction, x),
            "column_logits": attn.reconstruction(attn.column_reconstruction, x)}


def dba_fast(inputs, mask, attn):
    context, compressed_query, _ = dba_attention(**inputs, padding_mask=mask)
    return AttentionOutput(context, compressed_query)


def dba_naive(inputs, mask, attn):
    return naive_dba_attention(**inputs, padding_mask=mask)


def kerformer_inputs(attn, x, mask, state):
    query, key, value = attn.project(x)
    return {"query": query, "key": key, "value": value, "se_weights": attn.se_weights()}


def kerformer_fast(inputs, mask, attn):
    """The op in chunks of 4 tokens (``summary_chunk``), so that the chunked sums are checked too."""
    context, _ = kerformer_attention(**inputs, padding_mask=mask, se_mode=attn.settings.se_mode,
                                     eps=attn.settings.eps, summary_chunk=4)
    return AttentionOutput(attn.merge_heads(context))


def kerformer_naive(inputs, mask, attn):
    return naive_kerformer_attention(**inputs, padding_mask=mask, se_mode=attn.settings.se_mode,
                                     eps=attn.settings.eps)


def psf_inputs(attn, x, mask, state):
    return {"values": attn.value(x), "weights": attn.factor_weights(x)}


def psf_fast(inputs, mask, attn):
    return AttentionOutput(psf_attention(**inputs, padding_mask=mask, residual=attn.settings.residual))


def psf_naive(inputs, mask, attn):
    return naive_psf_attention(**inputs, padding_mask=mask, residual=attn.settings.residual)


OPS = {"singularformer": Op(singularformer_inputs, singularformer_fast, singularformer_naive),
       "dba": Op(dba_inputs, dba_fast, dba_naive),
       "kerformer": Op(kerformer_inputs, kerformer_fast, kerformer_naive),
       "psf": Op(psf_inputs, psf_fast, psf_naive)}
CASES = {
    "singularformer": ("singularformer", {"gamma_orthogonal": 0.3, "gamma_diagonal": 0.7}),
    "singularformer-r3-no-residual": ("singularformer", {"rank": 3, "residual_attention": False}),
    "dba": ("dba", {}),
    "dba-small": ("dba", {"compressed_length": 5, "compressed_dim": 6}),
    "kerformer-token": ("kerformer", {"se_mode": "token"}),
    "kerformer-channel": ("kerformer", {"se_mode": "channel", "se_reduction": 2}),
    "kerformer-none": ("kerformer", {"se_mode": "none"}),
    "psf": ("psf", {}),
    "psf-residual": ("psf", {"residual": True, "num_factors": 3, "num_links": 3, "factor_hidden_size": 7}),
}
# The batches: padded (the mixed batch: full, right-padded, left-padded, one real token) or not (three full
# sequences, no mask given to the ops: their unpadded paths), and whether a previous layer hands on a state.
BATCHES = {"padded": (True, False), "padded-with-state": (True, True), "unpadded-with-state": (False, True)}


def case_inputs(case_id: str, batch: str = "padded"):
    """The layer of ``CASES[case_id]``, the batch of ``BATCHES[batch]`` (``x``, its real tokens ``mask`` and the mask
    the ops get, None without padding) and its op's inputs as leaves (float64)."""
    name, settings = CASES[case_id]
    padded, previous_state = BATCHES[batch]
    attn = build(name, settings)
    x, mask = mixed_batch() if padded else random_batch([10, 10, 10], ["right"] * 3, 10)
    given_mask = mask if padded else None
    state = previous_state_of(attn, x) if previous_state else None
    with torch.no_grad():
        inputs = OPS[name].inputs(attn, x, given_mask, state)
    return attn, x, mask, given_mask, {key: as_leaves(value) for key, value in inputs.items()}


def as_leaves(value):
    """A tensor, or each tensor of a tuple, copied as a leaf that takes gradients (None stays None)."""
    if isinstance(value, tuple):
        return tuple(as_leaves(part) for part in value)
    return None if value is None else value.clone().requires_grad_()


def leaves_in(inputs: dict) -> list[torch.Tensor]:
    """Every tensor of ``inputs``, those in tuples included."""
    flat = [part for value in inputs.values() for part in (value if isinstance(value, tuple) else (value,))]
    return [value for value in flat if value is not None]


def previous_state_of(attn, x: torch.Tensor) -> torch.Tensor | None:
    """What a previous layer hands on to ``attn`` for the batch ``x``: its own output state on other inputs."""
    if not attn.carries_state:
        return None
    with torch.no_grad():
        return attn(torch.randn_like(x), None).state


def scalar_of(output: AttentionOutput, mask: torch.Tensor) -> torch.Tensor:
    """A scalar reading every output at real tokens with fixed, distinct weights: the context's real rows, the state
    and the auxiliary loss."""
    real = output.context[mask]
    total = (real * torch.linspace(-1, 1, real.numel(), dtype=real.dtype).view_as(real)).sum()
    if output.state is not None:
        total = total + (output.state * torch.linspace(0, 1, output.state.numel(), dtype=real.dtype).view_as(
            output.state)).sum()
    return total if output.aux_loss is None else total + output.aux_loss


def outputs_and_gradients(form, inputs: dict, mask: torch.Tensor, given_mask: torch.Tensor | None,
                          attn) -> list[torch.Tensor]:
    """``form``'s context at the real tokens (``mask``), state, auxiliary loss and the gradients of :func:`scalar_of` to
    the inputs, the form given ``given_mask``."""
    output = form(inputs, given_mask, attn)
    gradients = torch.autograd.grad(scalar_of(output, mask), leaves_in(inputs))
    present = [value for value in (output.state, output.aux_loss) if value is not None]
    return [output.context[mask], *present, *gradients]


@pytest.mark.parametrize("batch", BATCHES)
@pytest.mark.parametrize("case_id", CASES)
def test_fast_op_equals_naive_form(case_id, batch):
    attn, _, mask, given_mask, inputs = case_inputs(case_id, batch)
    op = OPS[CASES[case_id][0]]
    fast = outputs_and_gradients(op.fast, inputs, mask, given_mask, attn)
    naive = outputs_and_gradients(op.naive, inputs, mask, given_mask, attn)
    for actual, expected in zip(fast, naive, strict=True):
        assert_float64_close(actual, expected)


@pytest.mark.parametrize("case_id", CASES)
def test_naive_form_matches_reference(case_id):
    attn, x, mask, _, inputs = case_inputs(case_id)
    naive = OPS[CASES[case_id][0]].naive(inputs, mask, attn)
    refs = reference(attn, x, mask)
    for b, ref in enumerate(refs):
        real = mask[b]
        heads = naive.attentions.shape[1]  # PSF's matrix is one head's
        assert_float64_close(naive.context[b][real], ref.context)
        assert_float64_close(naive.attentions[b][:, real][:, :, real], ref.attention.expand(heads, -1, -1))
        if ref.state is not None:
            assert_float64_close(naive.state[b], ref.state)
    if refs[0].aux_loss is not None:
        assert_float64_close(naive.aux_loss, torch.stack([ref.aux_loss for ref in refs]).mean())
