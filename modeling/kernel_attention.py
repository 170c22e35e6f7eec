"""Kernelized attention: the shared forward of the mechanisms whose attention matrix factors through feature maps.

With query features ``phi(Q)`` and key features ``varphi(K)`` (pads zeroed), per head::

    A_ij  = phi(q_i) . varphi(k_j) / normaliser(phi(q_i) . sum_j varphi(k_j))
    out_i = phi(q_i) (sum_j varphi(k_j)^T v_j) / normaliser(phi(q_i) . sum_j varphi(k_j))

computed right to left, so that only ``F x d`` summaries are built (F: the feature width): O(N F d) time and
O(N (F + d)) memory. A mechanism gives its features (:meth:`KernelAttention.kernel_features`) and, where its
paper or its authors' code does, its own :meth:`KernelAttention.normaliser` (default: ``+ eps``).

Dropout (``attention_probs_dropout_prob``): in training, whole columns of A are dropped, one Bernoulli draw per
(sequence, head, key token) shared by every query, kept ones scaled by ``1 / (1 - p)``. That is ``A_ij m_j``: the
mask multiplies ``varphi(k_j)`` in the summary ``sum_j varphi(k_j)^T v_j`` only, not in the normaliser, so the cost
stays linear (a per-(i, j) mask would need the N x N matrix).
"""

from __future__ import annotations

import torch

from .attention_base import AttentionOutput, EfficientAttention


class KernelAttention(EfficientAttention):
    """Base of the kernelized mechanisms (see the module docstring); subclasses define :meth:`kernel_features`."""

    def kernel_features(self, hidden_states: torch.Tensor, padding_mask: torch.Tensor | None):
        """``phi(Q) [B, h, N, F]``, ``varphi(K) [B, h, N, F]`` (zero at pads) and ``V [B, h, N, d]``."""
        raise NotImplementedError

    def project(self, hidden_states: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Queries, keys and values, each ``[B, h, N, d]``."""
        return tuple(self.split_heads(proj(hidden_states)) for proj in (self.query, self.key, self.value))

    def normaliser(self, similarity_sums: torch.Tensor) -> torch.Tensor:
        """``phi(q_i) . sum_j varphi(k_j)`` ``[B, h, N, 1]`` -> the row normaliser; default ``+ eps``."""
        return similarity_sums + self.settings.eps

    def dropped_keys(self, keys: torch.Tensor) -> torch.Tensor:
        """``keys [B, h, N, F]`` with whole key rows dropped (attention dropout on the columns of A, see the module
        docstring); the keys themselves outside training or without dropout."""
        if not self.training or self.dropout.p == 0:
            return keys
        return keys * self.dropout(keys.new_ones(*keys.shape[:-1], 1))

    def forward(self, hidden_states, padding_mask=None, state=None, output_attentions=False) -> AttentionOutput:
        self.check_length(hidden_states.shape[1])
        query, keys, value = self.kernel_features(hidden_states, padding_mask)
        summary = torch.matmul(self.dropped_keys(keys).transpose(-1, -2), value)  # sum_j m_j K'_j^T v_j, [B, h, F, d]
        normaliser = self.normaliser(torch.matmul(query, keys.sum(2).unsqueeze(-1)))  # [B, h, N, 1]
        context = torch.matmul(query, summary) / normaliser
        attentions = None
        if output_attentions:
            attentions = torch.matmul(query, keys.transpose(-1, -2)) / normaliser
        return AttentionOutput(self.merge_heads(context), attentions=attentions)
