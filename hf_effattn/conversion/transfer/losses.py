"""What an attention transfer minimises and reports: each student layer's attention-block output under teacher
forcing, compared with the teacher's over real tokens only (pads never enter a loss or a measurement)."""

from __future__ import annotations

import torch
from torch import nn

from .teacher import encoder_layers, teacher_targets

MODEL_INPUTS = ("input_ids", "attention_mask", "token_type_ids", "position_ids", "inputs_embeds", "pixel_values")


def model_inputs(batch: dict, device) -> dict:
    """The entries of a data-loader batch that the base model takes (labels and the like dropped), on ``device``."""
    return {key: value.to(device) for key, value in batch.items() if key in MODEL_INPUTS}


def student_outputs(model: nn.Module, layer_inputs: list[torch.Tensor], padding_mask) -> list[torch.Tensor]:
    """Each layer's attention-block output ``[B, N, C]`` when its mechanism gets the teacher's input to that layer
    and the state of the student layer before it."""
    outputs, state = [], None
    for layer, hidden_states in zip(encoder_layers(model), layer_inputs):
        attention = layer.attention.self(hidden_states, padding_mask, state, False)
        outputs.append(layer.attention.output.dense(attention.context))
        state = attention.state
    return outputs


def real_token_weights(padding_mask: torch.Tensor | None, like: torch.Tensor) -> torch.Tensor:
    """``[B, N, 1]`` weights that average over real tokens: 1 / (number of real tokens) at each, 0 at pads."""
    if padding_mask is None:
        return torch.full((*like.shape[:2], 1), 1.0 / (like.shape[0] * like.shape[1]), device=like.device)
    weights = padding_mask.to(like.dtype).unsqueeze(-1)
    return weights / weights.sum().clamp_min(1.0)


def masked_mse(prediction: torch.Tensor, target: torch.Tensor, padding_mask) -> torch.Tensor:
    """Mean over real tokens and channels of ``(prediction - target)^2``; pads contribute nothing."""
    squared = (prediction - target).pow(2).mean(-1, keepdim=True)
    return (squared * real_token_weights(padding_mask, prediction)).sum()


def masked_cosine(prediction: torch.Tensor, target: torch.Tensor, padding_mask) -> torch.Tensor:
    """Mean over real tokens of the cosine similarity of ``prediction`` and ``target`` ``[B, N, C]``."""
    cosine = nn.functional.cosine_similarity(prediction.float(), target.float(), dim=-1).unsqueeze(-1)
    return (cosine * real_token_weights(padding_mask, cosine)).sum()


@torch.no_grad()
def measure(model: nn.Module, teacher: nn.Module, batches: list[dict]) -> tuple[list[tuple[float, float]], float]:
    """Per layer ``(MSE, cosine)`` under teacher forcing, and the last hidden state's token cosine, averaged
    over ``batches`` (in eval mode; the hybrid layers' parts as :func:`~hf_effattn.models.hybrid_parts.only_part` sets
    them)."""
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    per_layer, hidden = [], []
    for batch in batches:
        inputs = model_inputs(batch, device)
        layer_inputs, mask, targets, teacher_hidden = teacher_targets(teacher, inputs)
        outputs = student_outputs(model, layer_inputs, mask)
        per_layer.append([(masked_mse(o, t, mask).item(), masked_cosine(o, t, mask).item())
                          for o, t in zip(outputs, targets)])
        hidden.append(masked_cosine(model.base_model(**inputs).last_hidden_state, teacher_hidden, mask).item())
    model.train(was_training)
    layers = [tuple(sum(values) / len(batches) for values in zip(*layer)) for layer in zip(*per_layer)]
    return layers, sum(hidden) / len(hidden)
