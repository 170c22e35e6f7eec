"""The device lane, whole models: the text and image models of tests/helpers/models.py with every registered mechanism,
alone and beside a window, in float32 and bfloat16 on the device, on the exact path and on the fast path, in
training mode, give the float64 CPU model's logits, loss (auxiliary losses included) and gradients; and on the
device a text model's outputs at the real tokens are the same whether its batch is padded on the right, on the left
or with holes."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import pytest
import torch

import hf_effattn
from hf_effattn.modeling.fast_paths import fast_paths
from helpers.device_lane import (
    PRECISIONS, Precision, allowed_error, as_float64, assert_close_in_norm, assert_gradients_close, cases, copied_to,
    exact_in_every_precision, flat, local_part, padding_mask, parameter_gradients,
)
from helpers.models import PAD, TEXT, VISION, text_config, text_inputs, vision_config

# Two layers of width 32 (heads of 16, a width fused kernels take), texts of 160 tokens and images of 6 x 6 patches
# and [CLS], beside the lane's window: the mechanism lane's shapes and settings, so that the fast paths compiled
# there serve here. Weights drawn with std 0.1, so that attention moves the outputs: at Transformers' 0.02 the
# residual stream hides it, and leaving the padding mask out changes the outputs by less than bfloat16's tolerance.
SIZES = dict(hidden_size=32, num_attention_heads=2, intermediate_size=64, initializer_range=0.1)
LENGTH, IMAGE_SIZE = 160, 24
TEXT_SIZES = dict(SIZES, max_position_embeddings=LENGTH + 2)  # RoBERTa's positions start after its pad id
CASES = cases()


@dataclass
class ModelRun:
    """A forward and backward of the model's loss, in float64 on the CPU: the logits (at the real tokens), the loss
    and the parameters' gradients by name."""

    logits: torch.Tensor
    loss: torch.Tensor
    gradients: dict[str, torch.Tensor]


@dataclass
class ModelCase:
    """A float64 CPU model (training mode, weights exact in every precision), its inputs and labels, where its
    logits are real (``[B, N]`` for a text's tokens; None: every logit), and its reference :class:`ModelRun`."""

    model: torch.nn.Module
    inputs: dict[str, torch.Tensor]
    labels: torch.Tensor
    real: torch.Tensor | None
    expected: ModelRun


def model_run(model, inputs: dict, labels: torch.Tensor, real: torch.Tensor | None, path: str = "exact") -> ModelRun:
    """A forward and backward on ``path`` (a mode of ``fast_paths``)."""
    model.zero_grad(set_to_none=True)
    with fast_paths(path):
        output = model(**inputs, labels=labels)
        output.loss.backward()
    logits = output.logits if real is None else output.logits[real]
    return ModelRun(as_float64(logits), as_float64(output.loss), parameter_gradients(model))


def text_model(case: str) -> tuple:
    """A masked-LM RoBERTa on three texts (one full, one padded on the right, one on the left), labels at the real
    tokens."""
    model = hf_effattn.EffAttnRobertaForMaskedLM(text_config(case, **local_part(case), **TEXT_SIZES))
    inputs = text_inputs(3, LENGTH)
    real = inputs["attention_mask"].bool()
    labels = torch.randint(0, TEXT["vocab_size"], real.shape, generator=torch.Generator().manual_seed(2))
    return model, inputs, labels.masked_fill(~real, -100), real


def image_model(case: str) -> tuple:
    """A ViT classifier of ten labels on eight images (a logit depends on a single [CLS] token: 80 of them make a
    norm that bfloat16's rounding does not dominate)."""
    model = hf_effattn.EffAttnViTForImageClassification(vision_config(
        case, **local_part(case), image_size=IMAGE_SIZE, num_labels=10, **SIZES))
    generator = torch.Generator().manual_seed(2)
    labels = torch.randint(0, 10, (8,), generator=generator)
    pixels = torch.randn(8, VISION["num_channels"], IMAGE_SIZE, IMAGE_SIZE, generator=generator)
    return model, {"pixel_values": pixels}, labels, None


MODELS = {"text": text_model, "image": image_model}


@functools.cache
def model_case(kind: str, case: str) -> ModelCase:
    torch.manual_seed(0)
    model, inputs, labels, real = MODELS[kind](case)
    model = exact_in_every_precision(model).train()
    inputs = {name: exact_in_every_precision(x) if x.is_floating_point() else x for name, x in inputs.items()}
    return ModelCase(model, inputs, labels, real, model_run(model, inputs, labels, real))


def on_device(tensor: torch.Tensor, device: torch.device, precision: Precision) -> torch.Tensor:
    """``tensor`` on ``device``, in ``precision``'s dtype if it is floating point (token ids and masks stay)."""
    return tensor.to(device=device, dtype=precision.dtype if tensor.is_floating_point() else tensor.dtype)


@functools.cache
def run_on(device: torch.device, kind: str, case: str, dtype: str, path: str = "exact") -> ModelRun:
    """The float64 model of ``kind`` and ``case`` copied to ``device`` in ``dtype``, and run there on ``path``."""
    expected, precision = model_case(kind, case), PRECISIONS[dtype]
    inputs = {name: on_device(x, device, precision) for name, x in expected.inputs.items()}
    real = None if expected.real is None else expected.real.to(device)
    return model_run(copied_to(expected.model, device, precision), inputs, expected.labels.to(device), real, path)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("kind", MODELS)
def test_the_model_equals_the_float64_model_on_the_cpu(kind, case, dtype, path, device):
    """Within what the dtype allows (:func:`~helpers.device_lane.allowed_error`, from the CPU in that dtype)."""
    expected, on_cpu = model_case(kind, case).expected, run_on(torch.device("cpu"), kind, case, dtype)
    actual, precision = run_on(device, kind, case, dtype, path), PRECISIONS[dtype]
    what = f"the {kind} model with {case} on the {path} path in {dtype} on {device}, against float64 on the CPU"
    for name in ("logits", "loss"):
        value, reference = getattr(actual, name), getattr(expected, name)
        assert_close_in_norm(value, reference, allowed_error(precision, reference, getattr(on_cpu, name)),
                             f"{name} of {what}")
    assert_gradients_close(actual.gradients, expected.gradients,
                           allowed_error(precision, flat(expected.gradients), flat(on_cpu.gradients)),
                           f"gradients of {what}")


def padded_texts(padding: str) -> dict[str, torch.Tensor]:
    """Three texts (:func:`~helpers.device_lane.real_lengths`: one full, two shorter; the same tokens on the right,
    on the left or with holes) padded as ``padding`` says."""
    mask = padding_mask(padding, LENGTH)
    tokens = torch.randint(3, TEXT["vocab_size"], (int(mask.sum()),), generator=torch.Generator().manual_seed(3))
    return {"input_ids": torch.full(mask.shape, PAD).masked_scatter(mask, tokens), "attention_mask": mask.long()}


@pytest.mark.parametrize("padding", ["left", "holes"])
@pytest.mark.parametrize("case", CASES)
def test_padding_changes_nothing_at_the_real_tokens(case, padding, dtype, path, device):
    """The texts padded on the left or with holes give, at their real tokens, their outputs padded on the right (in
    training mode, as the rest of the lane: the fast path compiled for it serves)."""
    torch.manual_seed(0)
    model = hf_effattn.EffAttnRobertaModel(text_config(case, **local_part(case), **TEXT_SIZES))
    model = copied_to(model.train(), device, PRECISIONS[dtype])
    outputs = {}
    with fast_paths(path):
        for side in ("right", padding):
            batch = {name: x.to(device) for name, x in padded_texts(side).items()}
            outputs[side] = model(**batch).last_hidden_state[batch["attention_mask"].bool()].detach()
    assert_close_in_norm(outputs[padding], as_float64(outputs["right"]), PRECISIONS[dtype].tolerance,
                         f"{case} on the {path} path in {dtype} on {device}: the real tokens' outputs padded {padding} "
                         "against padded right")
