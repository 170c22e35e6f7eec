"""Output dataclasses of the encoders and heads.

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
    """Adds ``aux_loss``, the layers' mean (training only)."""

    aux_loss: torch.FloatTensor | None = None


@dataclass
class EffAttnModelOutput(BaseModelOutputWithPooling):
    aux_loss: torch.FloatTensor | None = None


@dataclass
class EffAttnMaskedLMOutput(MaskedLMOutput):
    aux_loss: torch.FloatTensor | None = None


@dataclass
class EffAttnSequenceClassifierOutput(SequenceClassifierOutput):
    aux_loss: torch.FloatTensor | None = None


@dataclass
class EffAttnTokenClassifierOutput(TokenClassifierOutput):
    aux_loss: torch.FloatTensor | None = None


@dataclass
class EffAttnQuestionAnsweringOutput(QuestionAnsweringModelOutput):
    aux_loss: torch.FloatTensor | None = None


@dataclass
class EffAttnMultipleChoiceOutput(MultipleChoiceModelOutput):
    aux_loss: torch.FloatTensor | None = None


@dataclass
class EffAttnImageClassifierOutput(ImageClassifierOutput):
    aux_loss: torch.FloatTensor | None = None


@dataclass
class EffAttnMaskedImageModelingOutput(MaskedImageModelingOutput):
    aux_loss: torch.FloatTensor | None = None


def model_output(encoded, sequence_output: torch.Tensor, pooler: nn.Module | None) -> EffAttnModelOutput:
    """``sequence_output [B, N, C]`` (pooled) and ``encoded``'s fields."""
    pooled = pooler(sequence_output) if pooler is not None else None
    return EffAttnModelOutput(sequence_output, pooled, encoded.hidden_states, encoded.attentions, encoded.aux_loss)


def head_output(output_class, encoded, loss: torch.Tensor | None, **fields):
    """A head's ``output_class``, ``loss`` plus ``aux_loss``."""
    aux_loss = encoded.aux_loss
    total = loss + aux_loss if loss is not None and aux_loss is not None else loss
    return output_class(
        loss=total, hidden_states=encoded.hidden_states, attentions=encoded.attentions, aux_loss=aux_loss, **fields
    )
