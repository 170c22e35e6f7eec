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

Beside a local window (``local_window``, see ``local_window.py``) the window's exact softmax terms and the
mechanism's terms share one normaliser (LoLCATs, :meth:`KernelAttention.attend_with_window`): the window's keys
get ``(1 - sigma) exp(s_ij - max_j s_ij)``, the keys outside it ``sigma phi(q_i) . varphi(k_j)``, with sigma a learned
weight per head. The mechanism's terms outside the window are those over every key (its usual summaries) less those
at the window's keys, which the window's blocks give.
"""

from __future__ import annotations

import torch

from .attention_base import AttentionOutput, EfficientAttention
from .local_window import RankOrder, at_least_float32, exact_weights


class KernelAttention(EfficientAttention):
    """Base of the kernelized mechanisms (see the module docstring); subclasses define :meth:`kernel_features`."""

    initial_mechanism_weight = 0.01  # measured on MiniLM at 2,048 tokens: see docs/long-inputs.md
    # Beside a window, the mechanism's terms stand for the keys outside it (LoLCATs), not for every key: measured in
    # benchmarks/long_documents/window_span.py (docs/long-inputs.md); False counts the exact keys in both parts.
    mechanism_outside_window: bool = True

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

    def attend(self, hidden_states, padding_mask=None, state=None, output_attentions=False,
               projections=None) -> AttentionOutput:
        query, key, value = projections or self.project(hidden_states)
        query, keys = self.kernel_features(query, key, padding_mask)
        with torch.autocast(value.device.type, enabled=False):  # sums over N tokens overflow half precision
            query, keys, values = (at_least_float32(x) for x in (query, keys, value))
            keep = self.key_dropout(keys)
            dropped = keys if keep is None else keys * keep
            summary = torch.matmul(dropped.transpose(-1, -2), values)  # sum_j m_j K'_j^T v_j, [B, h, F, d]
            normaliser = self.normaliser(torch.matmul(query, keys.sum(2).unsqueeze(-1)))  # [B, h, N, 1]
            context = (torch.matmul(query, summary) / normaliser).to(value.dtype)
            attentions = None
            if output_attentions:
                attentions = (torch.matmul(query, keys.transpose(-1, -2)) / normaliser).to(value.dtype)
        return AttentionOutput(self.merge_heads(context), attentions=attentions)

    def attend_with_window(self, hidden_states, padding_mask=None, state=None,
                           output_attentions=False) -> AttentionOutput:
        """The window and the mechanism under one normaliser (LoLCATs), ``sigma = sigmoid(mechanism_logit)``::

            out_i = ((1 - sigma) sum_{j exact} e_ij v_j + sigma sum_{j outside} phi(q_i).varphi(k_j) v_j)
                    / ((1 - sigma) sum_{j exact} e_ij   + sigma sum_{j outside} phi(q_i).varphi(k_j))

        with ``e_ij = exp(s_ij - max_j s_ij)`` over the exact keys (the window and the global tokens). The terms
        outside are all of the mechanism's minus those at the exact keys, which the window's blocks give: O(N (3b +
        g) F). The global tokens' rows are exact over every token."""
        if self.parts == "window":
            return super().attend_with_window(hidden_states, padding_mask, state, output_attentions)
        query, key, value = self.project(hidden_states)
        features = self.kernel_features(query, key, padding_mask)
        with torch.autocast(value.device.type, enabled=False):  # sums over N tokens overflow half precision
            return self.shared_normaliser_attention(query, key, value, *features, padding_mask, output_attentions)

    def shared_normaliser_attention(self, query, key, value, query_features, key_features, padding_mask,
                                    output_attentions) -> AttentionOutput:
        """:meth:`attend_with_window`'s computation from the projections and the mechanism's features ``[B, h, N,
        *]``, its sums in at least float32, the context returned in the projections' dtype."""
        query_features, key_features = at_least_float32(query_features), at_least_float32(key_features)
        batch, _, length, _ = query.shape
        order = RankOrder(padding_mask, batch, length, query.device)
        weight = self.window.mechanism_weight()[:, None, None]  # [h, 1, 1]
        attentions = None
        if output_attentions:
            attentions = self.dense_shared_attention(query, key, query_features, key_features, order, weight)
        blocks = self.window.blocks(order, length, query.device)
        query, key, value, query_features = (order.to_ranks(x) for x in (query, key, value, query_features))
        key_features = order.zero_past_end(order.to_ranks(key_features))
        keep = self.key_dropout(key_features)
        exact = exact_weights(blocks.products(query * query.shape[-1] ** -0.5, key), blocks.allowed)
        block_weight = weight[..., None]  # [h, 1, 1, 1], for the blocks [B, h, n, b, 3b + g]
        terms = (1 - block_weight) * exact  # what each exact key adds to a row: its softmax term, less
        if self.mechanism_outside_window:  # the mechanism's term for it (counted in `everywhere`)
            terms = terms - block_weight * blocks.products(query_features, key_features)
        terms = terms.masked_fill(~blocks.allowed, 0)  # [B, h, n, b, 3b + g]
        dropped, values = key_features if keep is None else key_features * keep, at_least_float32(value)
        everywhere = query_features @ (dropped.transpose(-1, -2) @ values)  # the mechanism over every key, [B, h, N, d]
        everywhere_sums = query_features @ key_features.sum(2).unsqueeze(-1)  # [B, h, N, 1]
        kept = terms if keep is None else terms * blocks.keys(keep).transpose(-1, -2)
        numerator = blocks.weighted(kept, values) + weight * everywhere
        denominator = blocks.tokens(terms.sum(-1, keepdim=True)) + weight * everywhere_sums
        context = numerator / denominator.clamp_min(torch.finfo(denominator.dtype).tiny)
        context = self.window.with_global_rows(context.to(value.dtype), query, key, value, blocks, self.dropout)
        return AttentionOutput(self.merge_heads(order.to_positions(context)), attentions=attentions)

    def dense_shared_attention(self, query, key, query_features, key_features, order: RankOrder, weight):
        """The ``[B, h, N, N]`` matrix that :meth:`attend_with_window` applies (for ``output_attentions`` only), from
        the projections and features ``[B, h, N, *]`` in token positions (key features zero at pads)."""
        allowed = self.window.dense_allowed(order, query.shape[2], query.device)
        exact = exact_weights(query @ key.transpose(-1, -2) * query.shape[-1] ** -0.5, allowed)
        outside = (query_features @ key_features.transpose(-1, -2)) * (~allowed if self.mechanism_outside_window else 1)
        terms = (1 - weight) * exact + weight * outside
        return (terms / terms.sum(-1, keepdim=True).clamp_min(torch.finfo(terms.dtype).tiny)).to(query.dtype)
