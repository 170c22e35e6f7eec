"""Kernelized attention: the shared forward of the mechanisms whose attention matrix factors through feature maps.

With query features ``phi(Q)`` and key features ``varphi(K)`` (pads zeroed), per head::

    A_ij  = phi(q_i) . varphi(k_j) / normaliser(phi(q_i) . sum_j varphi(k_j))
    out_i = phi(q_i) (sum_j varphi(k_j)^T v_j) / normaliser(phi(q_i) . sum_j varphi(k_j))

computed right to left, so that only ``F x d`` summaries are built (F: the feature width): O(N F d) time and
O(N (F + d)) memory. Past ``summary_chunk`` tokens (512) the summaries are sums of products over chunks of tokens,
and the read-out one product a chunk: a GPU runs one product over all N tokens on a handful of its multiprocessors.
A mechanism gives its features (:meth:`KernelAttention.kernel_features`) and, where its paper or its authors' code
does, its own :meth:`KernelAttention.normaliser` (default: ``+ eps``).

Dropout (``attention_probs_dropout_prob``): in training, whole columns of A are dropped, one Bernoulli draw per
(sequence, head, key token) shared by every query, kept ones scaled by ``1 / (1 - p)``. That is ``A_ij m_j``: the
mask multiplies ``varphi(k_j)`` in the summary ``sum_j varphi(k_j)^T v_j`` only, not in the normaliser, so the cost
stays linear (a per-(i, j) mask would need the N x N matrix).

Beside an exact local part (``hybrid_attention.py``) the part's exact softmax terms and the mechanism's terms may
share one normaliser (LoLCATs; the model's ``shared_normaliser``), which the part computes from this class's terms
(:meth:`KernelAttention.kernel_features`, :meth:`KernelAttention.key_dropout`, :func:`terms_over_every_key` in chunks
of ``summary_chunk`` tokens, ``mechanism_outside_window``). With ``mechanism_outside_window`` (the default), the
mechanism's terms beside a window stand for the keys outside it (LoLCATs); False, for every key.

The computation runs in at least float32 with autocast off (:func:`at_least_float32`): sums over N tokens overflow
half precision. :func:`terms_over_every_key` takes the keys twice: ``dropped`` (times dropout's column mask ``m``)
for the summary, ``keys`` for the normaliser's sums; :func:`kernelized_attention` returns ``A`` only with
``output_attentions``, else None.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

from .attention_base import AttentionOutput, EfficientAttention
from .attention_settings import AttentionSettings
from .masking import at_least_float32


@dataclass(frozen=True)
class KernelSettings(AttentionSettings):
    """Settings of the kernelized mechanisms."""

    local_part_role = "kernel"


class KernelAttention(EfficientAttention):
    """Base of the kernelized mechanisms, which define :meth:`kernel_features`."""

    mechanism_outside_window: bool = True
    summary_chunk = 512

    def kernel_features(self, query: torch.Tensor, key: torch.Tensor, padding_mask: torch.Tensor | None):
        """``phi(Q), varphi(K) [B, h, N, F]``, zero at pads, of ``Q, K [B, h, N, d]``."""
        raise NotImplementedError

    def normaliser(self, similarity_sums: torch.Tensor) -> torch.Tensor:
        """Row normaliser of ``phi(q_i) . sum_j varphi(k_j) [B, h, N, 1]``."""
        return similarity_sums + self.settings.eps

    def key_dropout(self, like: torch.Tensor) -> torch.Tensor | None:
        """Dropout mask ``[B, h, N, 1]`` of A's key columns, or None."""
        if not self.training or self.dropout.p == 0:
            return None
        return self.dropout(like.new_ones(*like.shape[:-1], 1))

    def attend(self, hidden_states, padding_mask=None, state=None, output_attentions=False,
               projections=None) -> AttentionOutput:
        query, key, value = projections or self.project(hidden_states)
        context, attentions = kernelized_attention(*self.kernel_features(query, key, padding_mask), value,
                                                   self.normaliser, self.key_dropout, self.summary_chunk,
                                                   output_attentions)
        return AttentionOutput(self.merge_heads(context), attentions=attentions)


def terms_over_every_key(query, dropped, keys, values, summary_chunk: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``phi(q_i) sum_j m_j varphi(k_j)^T v_j [B, h, N, d]``, ``phi(q_i) . sum_j varphi(k_j) [B, h, N, 1]``."""
    length = query.shape[2]
    if length <= summary_chunk:
        return query @ (dropped.transpose(-1, -2) @ values), query @ keys.sum(2).unsqueeze(-1)
    count = (length + summary_chunk - 1) // summary_chunk

    def chunks(x: torch.Tensor) -> torch.Tensor:  # [B, h, N, F] -> [B, h, n, C, F], zero-padded
        return F.pad(x, (0, 0, 0, count * summary_chunk - length)).unflatten(2, (count, summary_chunk))

    summary = (chunks(dropped).transpose(-1, -2) @ chunks(values)).sum(2, keepdim=True)  # [B, h, 1, F, d]
    key_sums = chunks(keys).sum(3).sum(2).unsqueeze(-1)  # [B, h, F, 1]
    return (chunks(query) @ summary).flatten(2, 3)[:, :, :length], query @ key_sums


def kernelized_attention(query_features: torch.Tensor, key_features: torch.Tensor, value: torch.Tensor,
                         normaliser: Callable[[torch.Tensor], torch.Tensor],
                         key_dropout: Callable[[torch.Tensor], torch.Tensor | None] | None = None,
                         summary_chunk: int = 512, output_attentions: bool = False):
    """Context ``[B, h, N, d]`` and ``A [B, h, N, N]`` (or None) of the features and ``value``."""
    with torch.autocast(value.device.type, enabled=False):  # float32 at least: half precision overflows
        query, keys, values = (at_least_float32(x) for x in (query_features, key_features, value))
        keep = None if key_dropout is None else key_dropout(keys)
        dropped = keys if keep is None else keys * keep
        numerator, similarity_sums = terms_over_every_key(query, dropped, keys, values, summary_chunk)
        row_normaliser = normaliser(similarity_sums)
        context = (numerator / row_normaliser).to(value.dtype)
        attentions = None
        if output_attentions:
            attentions = (torch.matmul(query, keys.transpose(-1, -2)) / row_normaliser).to(value.dtype)
    return context, attentions
