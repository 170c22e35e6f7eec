"""Output dataclasses of the encoders and heads, and the losses the heads share.

Each output is its Transformers counterpart plus ``aux_loss``: the mechanisms' auxiliary loss (the mean over
the layers that return one, in training mode only, e.g. Singularformer's orthogonality and diagonality
terms). A head's ``loss`` already includes it whenever labels are given; ``aux_loss`` reports it separately.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from transformers.modeling_outputs import (
    BaseModelOutput,
    BaseModelOutputWithPooling,
    ImageClassifierOutput,
    MaskedImageModelingOutput,
    MaskedLMOutput,
    MultipleChoiceModelOutput,
    QuestionAnsweringModelOutput,
    SequenceClassifierOutput,
    TokenClassifierOutput,
)


@dataclass
class EffAttnEncoderOutput(BaseModelOutput):
    """The base output plus ``aux_loss``, the mean of the layers' auxiliary losses (training only)."""

    aux_loss: torch.FloatTensor | None = None


@dataclass
class EffAttnModelOutput(BaseModelOutputWithPooling):
    """The base output plus ``aux_loss``."""

    aux_loss: torch.FloatTensor | None = None


@dataclass
class EffAttnMaskedLMOutput(MaskedLMOutput):
    """The base output plus ``aux_loss``."""

    aux_loss: torch.FloatTensor | None = None


@dataclass
class EffAttnSequenceClassifierOutput(SequenceClassifierOutput):
    """The base output plus ``aux_loss``."""

    aux_loss: torch.FloatTensor | None = None


@dataclass
class EffAttnTokenClassifierOutput(TokenClassifierOutput):
    """The base output plus ``aux_loss``."""

    aux_loss: torch.FloatTensor | None = None


@dataclass
class EffAttnQuestionAnsweringOutput(QuestionAnsweringModelOutput):
    """The base output plus ``aux_loss``."""

    aux_loss: torch.FloatTensor | None = None


@dataclass
class EffAttnMultipleChoiceOutput(MultipleChoiceModelOutput):
    """The base output plus ``aux_loss``."""

    aux_loss: torch.FloatTensor | None = None


@dataclass
class EffAttnImageClassifierOutput(ImageClassifierOutput):
    """The base output plus ``aux_loss``."""

    aux_loss: torch.FloatTensor | None = None


@dataclass
class EffAttnMaskedImageModelingOutput(MaskedImageModelingOutput):
    """The base output plus ``aux_loss``."""

    aux_loss: torch.FloatTensor | None = None


def model_output(encoded, sequence_output: torch.Tensor, pooler: nn.Module | None) -> EffAttnModelOutput:
    """A base model's output from ``sequence_output [B, N, C]``, pooled if it has a ``pooler``, and the
    encoder's output ``encoded``."""
    return EffAttnModelOutput(
        last_hidden_state=sequence_output,
        pooler_output=pooler(sequence_output) if pooler is not None else None,
        hidden_states=encoded.hidden_states,
        attentions=encoded.attentions,
        aux_loss=encoded.aux_loss,
    )


def head_output(output_class, encoded, loss: torch.Tensor | None, **fields):
    """A head's ``output_class``: ``fields``, the task ``loss`` (None without labels) plus ``encoded.aux_loss``,
    and the encoder's other outputs."""
    aux_loss = encoded.aux_loss
    total = loss + aux_loss if loss is not None and aux_loss is not None else loss
    return output_class(
        loss=total, hidden_states=encoded.hidden_states, attentions=encoded.attentions, aux_loss=aux_loss, **fields
    )


def sequence_classification_loss(logits: torch.Tensor, labels: torch.Tensor, config) -> torch.Tensor:
    """The loss of ``logits [B, num_labels]`` for ``config.problem_type``, chosen as Transformers does when
    unset."""
    num_labels = config.num_labels
    labels = labels.to(logits.device)
    if config.problem_type is None:
        if num_labels == 1:
            config.problem_type = "regression"
        elif labels.dtype in (torch.long, torch.int):
            config.problem_type = "single_label_classification"
        else:
            config.problem_type = "multi_label_classification"
    if config.problem_type == "regression":
        if num_labels == 1:
            return nn.functional.mse_loss(logits.squeeze(), labels.squeeze().to(logits.dtype))
        return nn.functional.mse_loss(logits, labels.to(logits.dtype))
    if config.problem_type == "single_label_classification":
        return nn.functional.cross_entropy(logits.view(-1, num_labels), labels.view(-1))
    return nn.functional.binary_cross_entropy_with_logits(logits, labels.to(logits.dtype))
