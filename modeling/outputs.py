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
    """Adds ``aux_loss``: the layers' mean auxiliary loss (training only)."""

    aux_loss: torch.FloatTensor | None = None


@dataclass
class EffAttnModelOutput(BaseModelOutputWithPooling):
    """Adds ``aux_loss``."""

    aux_loss: torch.FloatTensor | None = None


@dataclass
class EffAttnMaskedLMOutput(MaskedLMOutput):
    """Adds ``aux_loss``."""

    aux_loss: torch.FloatTensor | None = None


@dataclass
class EffAttnSequenceClassifierOutput(SequenceClassifierOutput):
    """Adds ``aux_loss``."""

    aux_loss: torch.FloatTensor | None = None


@dataclass
class EffAttnTokenClassifierOutput(TokenClassifierOutput):
    """Adds ``aux_loss``."""

    aux_loss: torch.FloatTensor | None = None


@dataclass
class EffAttnQuestionAnsweringOutput(QuestionAnsweringModelOutput):
    """Adds ``aux_loss``."""

    aux_loss: torch.FloatTensor | None = None


@dataclass
class EffAttnMultipleChoiceOutput(MultipleChoiceModelOutput):
    """Adds ``aux_loss``."""

    aux_loss: torch.FloatTensor | None = None


@dataclass
class EffAttnImageClassifierOutput(ImageClassifierOutput):
    """Adds ``aux_loss``."""

    aux_loss: torch.FloatTensor | None = None


@dataclass
class EffAttnMaskedImageModelingOutput(MaskedImageModelingOutput):
    """Adds ``aux_loss``."""

    aux_loss: torch.FloatTensor | None = None


def model_output(encoded, sequence_output: torch.Tensor, pooler: nn.Module | None) -> EffAttnModelOutput:
    """Base model output: ``sequence_output [B, N, C]``, pooled if ``pooler``, plus ``encoded``'s."""
    return EffAttnModelOutput(
        last_hidden_state=sequence_output,
        pooler_output=pooler(sequence_output) if pooler is not None else None,
        hidden_states=encoded.hidden_states,
        attentions=encoded.attentions,
        aux_loss=encoded.aux_loss,
    )


def head_output(output_class, encoded, loss: torch.Tensor | None, **fields):
    """``output_class`` of ``fields`` and ``encoded``; ``loss`` (None without labels) plus ``aux_loss``."""
    aux_loss = encoded.aux_loss
    total = loss + aux_loss if loss is not None and aux_loss is not None else loss
    return output_class(
        loss=total, hidden_states=encoded.hidden_states, attentions=encoded.attentions, aux_loss=aux_loss, **fields
    )
