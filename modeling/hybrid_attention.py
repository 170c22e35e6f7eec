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

Training code may run one part alone (``parts``: window dropout, ablations; ``hf_effattn.models.hybrid_parts``).
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
from .masking import RankOrder, at_least_float32, masked_softmax


class LocalOutput(NamedTuple):
    """A local part's ``context [B, h, N, d]``, ``global_rows [B or 1, N]`` (True at global tokens) and, if asked,
    its ``[B, h, N, N]`` probabilities."""

    context: torch.Tensor
    global_rows: torch.Tensor
    attentions: torch.Tensor | None = None


class LocalPart(nn.Module):
    """Base of the exact local parts (window, blocks): the global tokens' exact rows and, beside a mechanism, the
    per-head gate ``sigma(mechanism_logit)`` starting at ``mechanism_weight`` (None: no gate)."""

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
        """The gate ``sigma(mechanism_logit)`` ``[h]``: each head's weight on the mechanism."""
        return torch.sigmoid(self.mechanism_logit)

    def global_rows(self, order: RankOrder, length: int, device) -> torch.Tensor:
        """``[B or 1, N]``: True at the global tokens (rank < g)."""
        return order.ranks_at_positions(length, device) < self.global_tokens

    def with_global_rows(self, context, query, key, value, lengths: torch.Tensor, padded: int, dropout: nn.Module):
        """Rank-ordered ``context [B, h, N, d]`` with the global rows exact over the ``lengths [B]`` real keys;
        inputs padded to ``padded``, so that shapes match alone and in a batch."""
        if not self.global_tokens:
            return context
        queries, keys, values = (F.pad(x, (0, 0, 0, padded - x.shape[2])) for x in (query, key, value))
        real = torch.arange(padded, device=key.device) < lengths[:, None]  # [B, padded]
        scores = queries[:, :, :self.global_tokens] @ keys.transpose(-1, -2) * query.shape[-1] ** -0.5
        probabilities = masked_softmax(at_least_float32(scores), real[:, None, None, :], dim=-1)
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
        """The part alone on ``[B, h, N, d]`` projections, computed in rank order by :meth:`softmax`."""
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
        scores = query @ key.transpose(-1, -2) * query.shape[-1] ** -0.5
        allowed = self.dense_allowed(order, query.shape[2], query.device)
        return masked_softmax(at_least_float32(scores), allowed, dim=-1).to(query.dtype)


@register_composition("mixed")
class HybridAttention(EfficientAttention):
    """A mechanism beside the local part ``self.window``, mixed per head by its gate ``sigma``:
    ``(1 - sigma) local(x) + sigma mechanism(x)``; the global rows are the part's alone."""

    local_part_class: ClassVar[type[LocalPart]]
    mechanism_class: ClassVar[type[EfficientAttention]]
    composition: ClassVar[type[HybridAttention]]  # the registered composition
    uses_query_key = True  # the part uses the query and key projections
    shares_normaliser: ClassVar[bool] = False

    def __init__(self, hidden_size: int, num_heads: int, settings: AttentionSettings, *, local: LocalPartSettings,
                 **kwargs):
        super().__init__(hidden_size, num_heads, settings, **kwargs)
        role = self.settings_class.local_part_role
        self.local = local
        self.window = self.local_part_class(num_heads, local.size, local.global_tokens,
                                            mechanism_weight=local.gate_start(role))
        self.parts = "both"

    def __reduce_ex__(self, protocol):
        """Pickled as the three classes it is built from, and its state."""
        return empty_hybrid, (self.composition, self.local_part_class, self.mechanism_class), self.__getstate__()

    def exact_forward(self, hidden_states, padding_mask=None, state=None, output_attentions=False) -> AttentionOutput:
        """Runs ``self.parts``: ``"both"``, or one alone (set by training code: window dropout, ablations)."""
        if self.window.initial_mechanism_weight is None or self.parts == "mechanism":
            return self.attend(hidden_states, padding_mask, state, output_attentions)
        return self.attend_mixed(hidden_states, padding_mask, state, output_attentions)

    def attend_mixed(self, hidden_states, padding_mask=None, state=None, output_attentions=False) -> AttentionOutput:
        """Mixes the part and the mechanism per head by the gate."""
        projections = self.project(hidden_states)
        local = self.window.attend(*projections, padding_mask, self.dropout, output_attentions)
        if self.parts == "window":  # the mechanism's state still feeds the windowless layers
            state = self.attend(hidden_states, padding_mask, state, projections=projections).state \
                if self.carries_state and self.local.local_window_every > 1 else None
            return AttentionOutput(self.merge_heads(local.context), state, attentions=local.attentions)
        mechanism = self.attend(hidden_states, padding_mask, state, output_attentions, projections)
        weight = self.window.mechanism_weight()[:, None, None]  # [h, 1, 1]
        context = self.mixed(local.context, self.split_heads(mechanism.context), weight, local.global_rows)
        attentions = None
        if output_attentions:
            attentions = self.mixed(local.attentions, mechanism.attentions, weight, local.global_rows)
        return AttentionOutput(self.merge_heads(context), mechanism.state, mechanism.aux_loss, attentions)

    def mixed(self, local: torch.Tensor, mechanism: torch.Tensor, weight: torch.Tensor,
              global_rows: torch.Tensor) -> torch.Tensor:
        """``(1 - weight) local + weight mechanism`` (``[B, h, N, *]``, ``weight [h, 1, 1]``) in the widest dtype;
        ``local``'s rows at ``global_rows [B or 1, N]``."""
        dtype = torch.promote_types(torch.promote_types(local.dtype, mechanism.dtype), weight.dtype)
        mixed = torch.lerp(local.to(dtype), mechanism.to(dtype), weight.to(dtype))
        if not self.window.global_tokens:
            return mixed
        return torch.where(global_rows[:, None, :, None], local, mixed)
