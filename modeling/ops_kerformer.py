"""Kerformer's attention as functions on tensors: the fast op, through ``d x d`` summaries (the kernelized forward of
``kernel_attention.py`` on :func:`kerformer_features`, the features the layer, ``attention_kerformer.py``, gives to
that forward), and its naive O(N^2) form, which builds the N x N matrix of Eq. 9 (for the tests: no layer calls it).

Shapes: B sequences of N tokens, h heads of width d, C = h d; ``padding_mask [B, N]`` bool, True at real tokens, or
None. Both forms take the layer's projections ``query``, ``key``, ``value [B, h, N, d]`` and SE-K's weights as
tensors, ``se_weights``: its two linear layers' ``(W_1, b_1, W_2, b_2)``, ``W_1 [d / ratio, d]``, ``W_2 [N_max or d,
d / ratio]`` (None: no SE-K, ``se_mode="none"``), read by ``se_mode`` ("token": one weight per token rank;
"channel": one per key channel). SE-K (:func:`reweight_keys`, Sec. 3.5) pools the keys (zero at pads) by their mean
``p`` over the real tokens and scales them by ``sigmoid(W_2 (W_1 p + b_1) + b_2)``: no ReLU between the layers.
"""

from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F

from .attention_base import AttentionOutput, EfficientAttention
from .kernel_attention import kernelized_attention
from .masking import token_ranks, zero_pads


def reweight_keys(keys: torch.Tensor, padding_mask: torch.Tensor | None, se_mode: str,
                  se_weights: tuple[torch.Tensor, ...] | None) -> torch.Tensor:
    """SE-K (Sec. 3.5): ``keys [B, h, N, d]`` times ``sigmoid(W_2 (W_1 p + b_1) + b_2)``, ``p`` their mean."""
    if se_weights is None:
        return keys
    batch, _, length, _ = keys.shape
    if padding_mask is None:
        pooled = keys.mean(2)
    else:
        pooled = keys.sum(2) / padding_mask.sum(-1).clamp(min=1)[:, None, None].to(keys.dtype)
    reduce_weight, reduce_bias, expand_weight, expand_bias = se_weights
    weights = torch.sigmoid(F.linear(F.linear(pooled, reduce_weight, reduce_bias), expand_weight, expand_bias))
    if se_mode == "channel":
        return keys * weights[:, :, None, :]
    ranks = token_ranks(padding_mask, batch, length, keys.device)  # [B, N]
    per_token = torch.gather(weights, 2, ranks[:, None, :].expand(-1, weights.shape[1], -1))
    return keys * per_token[..., None]


def kerformer_features(query: torch.Tensor, key: torch.Tensor, padding_mask: torch.Tensor | None, se_mode: str,
                       se_weights: tuple[torch.Tensor, ...] | None) -> tuple[torch.Tensor, torch.Tensor]:
    """``phi(Q) = sigmoid(Q)`` (Eq. 7) and ``K' = SE-K(softmax_d(K))`` (Eq. 8): ``[B, h, N, d]``."""
    keys = zero_pads(torch.softmax(key, dim=-1), padding_mask, token_dim=2)
    return torch.sigmoid(query), reweight_keys(keys, padding_mask, se_mode, se_weights)


def kerformer_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                        padding_mask: torch.Tensor | None, se_mode: str, se_weights: tuple[torch.Tensor, ...] | None,
                        eps: float, key_dropout: Callable[[torch.Tensor], torch.Tensor | None] | None = None,
                        summary_chunk: int = 512, output_attentions: bool = False):
    """``out_i = phi(q_i) (sum_j K'_j^T v_j) / (phi(q_i) . sum_j K'_j + eps)`` (Eq. 9), right to left (arguments: the
    module docstring; ``key_dropout``, ``summary_chunk``: :func:`~kernel_attention.kernelized_attention`'s).

    Returns the context ``[B, h, N, d]`` and, with ``output_attentions``, the matrix ``A [B, h, N, N]`` (else None)."""
    query_features, key_features = kerformer_features(query, key, padding_mask, se_mode, se_weights)
    return kernelized_attention(query_features, key_features, value, lambda sums: sums + eps, key_dropout,
                                summary_chunk, output_attentions)


def naive_kerformer_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                              padding_mask: torch.Tensor | None, se_mode: str,
                              se_weights: tuple[torch.Tensor, ...] | None, eps: float) -> AttentionOutput:
    """Kerformer with its N x N attention matrix built and applied (Gan et al. 2023; arguments: the module docstring).

    Eq. 7: ``phi(q) = sigmoid(q)``; Eq. 8: ``varphi(k) = softmax_d(k)``, row by row; Sec. 3.5, SE-K: the mean of
    ``varphi(K)`` over the real tokens, two linear layers without a ReLU, a sigmoid, one weight per real token's
    position in its sequence (its count of real tokens before it) or per channel; Eqs. 4-5 / 9: ``A_ij = phi(q_i) .
    k'_j / (sum_j phi(q_i) . k'_j + eps)`` over the real keys j, ``context = A V``.

    Returns the layer's output (``attention_base.AttentionOutput``): the context ``[B, N, C]`` (its rows at pads
    meaningless) and ``A [B, h, N, N]``."""
    batch, heads, length, _ = query.shape
    real = torch.ones(batch, length, dtype=torch.bool) if padding_mask is None else padding_mask
    keys = torch.softmax(key, dim=-1)
    if se_weights is not None:
        pooled = (keys * real[:, None, :, None]).sum(2) / real.sum(-1)[:, None, None]
        reduce_weight, reduce_bias, expand_weight, expand_bias = se_weights
        gate = torch.sigmoid(F.linear(F.linear(pooled, reduce_weight, reduce_bias), expand_weight, expand_bias))
        if se_mode == "channel":
            keys = keys * gate[:, :, None, :]
        else:
            positions = torch.stack([torch.cumsum(row, 0) - 1 for row in real.long()]).clamp(min=0)  # [B, N]
            keys = keys * torch.stack([gate[b][:, positions[b]] for b in range(batch)])[..., None]
    similarity = (torch.sigmoid(query) @ keys.transpose(-1, -2)).masked_fill(~real[:, None, None, :], 0.0)
    attention = similarity / (similarity.sum(-1, keepdim=True) + eps)
    return AttentionOutput(EfficientAttention.merge_heads(attention @ value), attentions=attention)
