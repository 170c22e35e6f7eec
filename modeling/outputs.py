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
    """:class:`~transformers.modeling_outputs.BaseModelOutput` plus ``aux_loss``."""

    aux_loss: torch.FloatTensor | None = None


@dataclass
class EffAttnModelOutput(BaseModelOutputWithPooling):
    """:class:`~transformers.modeling_outputs.BaseModelOutputWithPooling` plus ``aux_loss``."""

    aux_loss: torch.FloatTensor | None = None


@dataclass
class EffAttnMaskedLMOutput(MaskedLMOutput):
    """:class:`~transformers.modeling_outputs.MaskedLMOutput` plus ``aux_loss``."""

    aux_loss: torch.FloatTensor | None = None


@dataclass
class EffAttnSequenceClassifierOutput(SequenceClassifierOutput):
    """:class:`~transformers.modeling_outputs.SequenceClassifierOutput` plus ``aux_loss``."""

    aux_loss: torch.FloatTensor | None = None


@dataclass
class EffAttnTokenClassifierOutput(TokenClassifierOutput):
    """:class:`~transformers.modeling_outputs.TokenClassifierOutput` plus ``aux_loss``."""

    aux_loss: torch.FloatTensor | None = None


@dataclass
class EffAttnQuestionAnsweringOutput(QuestionAnsweringModelOutput):
    """:class:`~transformers.modeling_outputs.QuestionAnsweringModelOutput` plus ``aux_loss``."""

    aux_loss: torch.FloatTensor | None = None


@dataclass
class EffAttnMultipleChoiceOutput(MultipleChoiceModelOutput):
    """:class:`~transformers.modeling_outputs.MultipleChoiceModelOutput` plus ``aux_loss``."""

    aux_loss: torch.FloatTensor | None = None


@dataclass
class EffAttnImageClassifierOutput(ImageClassifierOutput):
    """:class:`~transformers.modeling_outputs.ImageClassifierOutput` plus ``aux_loss``."""

    aux_loss: torch.FloatTensor | None = None


@dataclass
class EffAttnMaskedImageModelingOutput(MaskedImageModelingOutput):
    """:class:`~transformers.modeling_outputs.MaskedImageModelingOutput` plus ``aux_loss``."""

    aux_loss: torch.FloatTensor | None = None


def model_output(encoded, sequence_output: torch.Tensor, pooler: nn.Module | None) -> EffAttnModelOutput:
    """A base model's output from its encoder's: ``sequence_output [B, N, C]`` (the last hidden state, after
    the family's final norm if any), its pooled form when the model has a ``pooler``, and the encoder's hidden
    states, attentions and ``aux_loss``."""
    return EffAttnModelOutput(
        last_hidden_state=sequence_output,
        pooler_output=pooler(sequence_output) if pooler is not None else None,
        hidden_states=encoded.hidden_states,
        attentions=encoded.attentions,
        aux_loss=encoded.aux_loss,
    )


def head_output(output_class, encoded, loss: torch.Tensor | None, **fields):
    """A head's ``output_class`` from its task ``loss`` (None without labels) and ``fields`` (logits, ...): the
    loss plus the encoder's ``aux_loss``, which is also reported alone, and the encoder's hidden states and
    attentions."""
    aux_loss = encoded.aux_loss
    total = loss + aux_loss if loss is not None and aux_loss is not None else loss
    return output_class(
        loss=total, hidden_states=encoded.hidden_states, attentions=encoded.attentions, aux_loss=aux_loss, **fields
    )


def sequence_classification_loss(logits: torch.Tensor, labels: torch.Tensor, config) -> torch.Tensor:
    """Regression, single-label or multi-label loss of ``logits [B, num_labels]``, chosen as Transformers does:
    ``config.problem_type``, or when unset, regression for one label, single-label for integer labels,
    multi-label otherwise (then stored in ``config.problem_type``)."""
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
