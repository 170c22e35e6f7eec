"""An exact local part beside a mechanism, composed into one attention module by the encoder layer.

The model declares its local part once (``local_settings.py``: a window or aligned blocks, global tokens, the gate's
start); a mechanism computes its own attention and knows nothing of it. Where a layer has the part,
``build_attention`` builds one class of the three (``attention_registry.hybrid_class``: ``<Mechanism>With<Part>``,
the composition first, then the mechanism), so that the parameters keep their names (``query``, ``key``, ``value``,
the mechanism's own, and the part's gate ``window.mechanism_logit``) and checkpoints load as they are. The parts
register by kind (``register_local_part``): the sliding window (``local_window.py``) and the aligned blocks
(``local_blocks.py``); the compositions by how they join (``register_composition``):

* ``"mixed"``, :class:`HybridAttention`: per head, ``sigma = sigmoid(mechanism_logit)``, the global tokens' rows the
  part's alone (exact)::

      out = (1 - sigma) local(x) + sigma mechanism(x)

* ``"shared"``, for a kernelized mechanism with the model's ``shared_normaliser`` in force (by default beside a
  window): the part's exact softmax terms and the mechanism's under one normaliser (``shared_normaliser.py``, one
  composition for each kind of part).

With the ``local`` attention (``local_attention.py``) the part is the whole attention, with no gate.

Training code may run the mechanism alone (``parts``: window dropout; ``hf_effattn.models.hybrid_parts``), and
closes the gate to read the part alone.
"""

from __future__ import annotations

import math
from typing import ClassVar, NamedTuple

import torch
import torch.nn.functional as F
from torch import nn
from transformers import initialization as init

from .attention_base import AttentionOutput, EfficientAttention
from .attention_registry import empty_hybrid, register_composition
from .attention_settings import AttentionSettings
from .local_settings import LocalPartSettings
from .masking import RankOrder, scaled_softmax


class LocalOutput(NamedTuple):
    """``context [B, h, N, d]``, ``global_rows [B or 1, N]`` (True at global tokens), ``attentions [B, h, N, N]``."""

    context: torch.Tensor
    global_rows: torch.Tensor
    attentions: torch.Tensor | None = None


class LocalPart(nn.Module):
    """Base of the exact local parts: global tokens and the per-head gate ``sigma(mechanism_logit)`` (if any)."""

    kind: ClassVar[str]

    def __init__(self, num_heads: int, global_tokens: int = 0, mechanism_weight: float | None = None):
        super().__init__()
        self.global_tokens = global_tokens
        self.initial_mechanism_weight = mechanism_weight
        if mechanism_weight is not None:
            self.mechanism_logit = nn.Parameter(torch.empty(num_heads))
            self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.initial_mechanism_weight is not None:
            weight = self.initial_mechanism_weight
            init.constant_(self.mechanism_logit, math.log(weight / (1 - weight)))

    def mechanism_weight(self) -> torch.Tensor:
        """``[h]``: each head's weight ``sigma(mechanism_logit)`` on the mechanism."""
        return torch.sigmoid(self.mechanism_logit)

    def global_rows(self, order: RankOrder, length: int, device) -> torch.Tensor:
        """``[B or 1, N]``: True at the global tokens (rank < g)."""
        return order.ranks_at_positions(length, device) < self.global_tokens

    def with_global_rows(self, context, query, key, value, lengths: torch.Tensor, padded: int, dropout: nn.Module):
        """Rank-ordered ``context [B, h, N, d]``, global rows exact over the ``lengths [B]`` real keys (padded)."""
        if not self.global_tokens:
            return context
        queries, keys, values = (F.pad(x, (0, 0, 0, padded - x.shape[2])) for x in (query, key, value))
        real = torch.arange(padded, device=key.device) < lengths[:, None]  # [B, padded]
        probabilities = scaled_softmax(queries[:, :, :self.global_tokens], keys, real[:, None, None, :])
        rows = (dropout(probabilities).to(value.dtype) @ values)[:, :, :query.shape[2]]  # [B, h, g or fewer, d]
        return torch.cat([rows, context[:, :, rows.shape[2]:]], dim=2)

    def dense_allowed(self, order: RankOrder, length: int, device) -> torch.Tensor:
        """``[B or 1, 1, N, N]``: the exact (query, key) pairs over real keys, in token positions."""
        ranks = order.ranks_at_positions(length, device)
        exact = self.exact_ranks(ranks[:, :, None], ranks[:, None, :])
        exact = exact | (ranks[:, None, :] < self.global_tokens) | (ranks[:, :, None] < self.global_tokens)
        if order.padding_mask is not None:
            exact = exact & order.padding_mask[:, None, :]
        return exact[:, None]

    def attend(self, query, key, value, padding_mask, dropout: nn.Module,
               output_attentions: bool = False) -> LocalOutput:
        """The part alone on ``[B, h, N, d]`` projections, in rank order."""
        batch, _, length, _ = query.shape
        order = RankOrder(padding_mask, batch, length, query.device)
        attentions = self.dense_probabilities(query, key, order) if output_attentions else None
        context = self.softmax(*(order.to_ranks(x) for x in (query, key, value)), order, dropout)
        return LocalOutput(order.to_positions(context), self.global_rows(order, length, query.device), attentions)

    def softmax(self, query, key, value, order: RankOrder, dropout: nn.Module) -> torch.Tensor:
        """The part's softmax, global rows exact: rank-ordered ``[B, h, N, d]`` in and out."""
        raise NotImplementedError

    def exact_ranks(self, query_ranks: torch.Tensor, key_ranks: torch.Tensor) -> torch.Tensor:
        """Whether a query rank sees a key rank exactly (broadcast), global tokens aside."""
        raise NotImplementedError

    def dense_probabilities(self, query, key, order: RankOrder) -> torch.Tensor:
        """The part's ``[B, h, N, N]`` probabilities, in token positions."""
        return scaled_softmax(query, key, self.dense_allowed(order, query.shape[2], query.device)).to(query.dtype)


@register_composition("mixed")
class HybridAttention(EfficientAttention):
    """``(1 - sigma) local(x) + sigma mechanism(x)`` per head, ``sigma`` the gate of the part ``self.window``; the
    global rows are the part's."""

    local_part_class: ClassVar[type[LocalPart]]
    mechanism_class: ClassVar[type[EfficientAttention]]
    composition: ClassVar[type[HybridAttention]]
    uses_query_key = True  # the part needs them
    shares_normaliser: ClassVar[bool] = False

    def __init__(self, hidden_size: int, num_heads: int, settings: AttentionSettings, *, local: LocalPartSettings,
                 **kwargs):
        super().__init__(hidden_size, num_heads, settings, **kwargs)
        self.local = local
        self.window = self.local_part_class(num_heads, local.size, local.global_tokens,
                                            mechanism_weight=local.gate_start(self.settings_class.local_part_role))
        self.parts = "both"

    def __reduce_ex__(self, protocol):
        """Pickled as the three classes it is built from, and its state."""
        return empty_hybrid, (self.composition, self.local_part_class, self.mechanism_class), self.__getstate__()

    def exact_forward(self, hidden_states, padding_mask=None, state=None, output_attentions=False) -> AttentionOutput:
        """Both parts mixed by the gate; the mechanism alone where training code sets ``self.parts = "mechanism"``."""
        if self.window.initial_mechanism_weight is None or self.parts == "mechanism":
            return self.attend(hidden_states, padding_mask, state, output_attentions)
        projections = self.project(hidden_states)
        local = self.window.attend(*projections, padding_mask, self.dropout, output_attentions)
        mechanism = self.attend(hidden_states, padding_mask, state, output_attentions, projections)
        weight = self.window.mechanism_weight()[:, None, None]  # [h, 1, 1]
        context = self.mixed(local.context, self.split_heads(mechanism.context), weight, local.global_rows)
        attentions = None
        if output_attentions:
            attentions = self.mixed(local.attentions, mechanism.attentions, weight, local.global_rows)
        return AttentionOutput(self.merge_heads(context), mechanism.state, mechanism.aux_loss, attentions)

    def mixed(self, local: torch.Tensor, mechanism: torch.Tensor, weight: torch.Tensor,
              global_rows: torch.Tensor) -> torch.Tensor:
        """``(1 - weight) local + weight mechanism`` (``[B, h, N, *]``, ``weight [h, 1, 1]``), global rows local's."""
        dtype = torch.promote_types(torch.promote_types(local.dtype, mechanism.dtype), weight.dtype)
        mixed = torch.lerp(local.to(dtype), mechanism.to(dtype), weight.to(dtype))
        if not self.window.global_tokens:
            return mixed
        return torch.where(global_rows[:, None, :, None], local, mixed)
