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
share one normaliser (LoLCATs; the model's ``shared_normaliser``): the part computes the equation from the terms
that this class gives, its features (:meth:`KernelAttention.kernel_features`), the key columns its dropout keeps
(:meth:`KernelAttention.key_dropout`), its terms over every key (:meth:`KernelAttention.over_every_key`) and which
keys they stand for (``mechanism_outside_window``).
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
    """Base of the kernelized mechanisms' settings: beside a local part, their terms may share its normaliser."""

    local_part_role = "kernel"


class KernelAttention(EfficientAttention):
    """Base of the kernelized mechanisms (see the module docstring); subclasses define :meth:`kernel_features`."""

    # Beside a window, the mechanism's terms stand for the keys outside it (LoLCATs), not for every key, so that no key
    # counts twice; False counts the exact keys in both parts.
    mechanism_outside_window: bool = True
    # Tokens per product of the summary over every key and of its read-out, past which they run in chunks
    # (:func:`terms_over_every_key` says why a GPU wants them).
    summary_chunk = 512

    def kernel_features(self, query: torch.Tensor, key: torch.Tensor, padding_mask: torch.Tensor | None):
        """``phi(Q) [B, h, N, F]`` and ``varphi(K) [B, h, N, F]`` (zero at pads) from the projections ``[B, h, N,
        d]``."""
        raise NotImplementedError

    def normaliser(self, similarity_sums: torch.Tensor) -> torch.Tensor:
        """``phi(q_i) . sum_j varphi(k_j)`` ``[B, h, N, 1]`` -> the row normaliser; default ``+ eps``."""
        return similarity_sums + self.settings.eps

    def key_dropout(self, like: torch.Tensor) -> torch.Tensor | None:
        """``[B, h, N, 1]``: which key columns of A attention dropout keeps, scaled by ``1 / (1 - p)`` (see the module
        docstring); None outside training or without dropout. ``like``: any ``[B, h, N, *]`` tensor."""
        if not self.training or self.dropout.p == 0:
            return None
        return self.dropout(like.new_ones(*like.shape[:-1], 1))

    def over_every_key(self, query, dropped, keys, values) -> tuple[torch.Tensor, torch.Tensor]:
        """:func:`terms_over_every_key` in chunks of :attr:`summary_chunk` tokens."""
        return terms_over_every_key(query, dropped, keys, values, self.summary_chunk)

    def attend(self, hidden_states, padding_mask=None, state=None, output_attentions=False,
               projections=None) -> AttentionOutput:
        query, key, value = projections or self.project(hidden_states)
        context, attentions = kernelized_attention(*self.kernel_features(query, key, padding_mask), value,
                                                   self.normaliser, self.key_dropout, self.summary_chunk,
                                                   output_attentions)
        return AttentionOutput(self.merge_heads(context), attentions=attentions)


def terms_over_every_key(query, dropped, keys, values, summary_chunk: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``phi(q_i) sum_j m_j varphi(k_j)^T v_j`` ``[B, h, N, d]`` and ``phi(q_i) . sum_j varphi(k_j)`` ``[B, h, N, 1]``
    from ``[B, h, N, *]`` features (``dropped``: key dropout applied) and values. Past ``summary_chunk`` tokens the
    summary is a sum of per-chunk products, and the read-out one product a chunk: one product over all N tokens, with
    a long inner dimension and few outputs, runs on a handful of a GPU's multiprocessors."""
    length = query.shape[2]
    if length <= summary_chunk:
        return query @ (dropped.transpose(-1, -2) @ values), query @ keys.sum(2).unsqueeze(-1)
    count = (length + summary_chunk - 1) // summary_chunk

    def chunks(x: torch.Tensor) -> torch.Tensor:  # [B, h, N, F] -> [B, h, n, C, F], zeros after the last token
        return F.pad(x, (0, 0, 0, count * summary_chunk - length)).unflatten(2, (count, summary_chunk))

    summary = (chunks(dropped).transpose(-1, -2) @ chunks(values)).sum(2, keepdim=True)  # [B, h, 1, F, d]
    key_sums = chunks(keys).sum(3).sum(2).unsqueeze(-1)  # [B, h, F, 1]
    return (chunks(query) @ summary).flatten(2, 3)[:, :, :length], query @ key_sums


def kernelized_attention(query_features: torch.Tensor, key_features: torch.Tensor, value: torch.Tensor,
                         normaliser: Callable[[torch.Tensor], torch.Tensor],
                         key_dropout: Callable[[torch.Tensor], torch.Tensor | None] | None = None,
                         summary_chunk: int = 512, output_attentions: bool = False):
    """The forward of every kernelized mechanism, on tensors: ``phi(Q)`` and ``varphi(K)`` ``[B, h, N, F]`` (zero at
    pads), ``value [B, h, N, d]``; ``normaliser``: the similarity sums ``[B, h, N, 1]`` -> the row normaliser;
    ``key_dropout``: features -> the key columns kept ``[B, h, N, 1]`` (scaled) or None (see the module docstring).
    Computed in at least float32, autocast off (sums over N tokens overflow half precision).

    Returns the context ``[B, h, N, d]`` in the values' dtype and, with ``output_attentions``, the matrix ``A [B, h,
    N, N]`` (else None)."""
    with torch.autocast(value.device.type, enabled=False):
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
