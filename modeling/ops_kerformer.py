"""Kerformer's attention on tensors: the op through ``d x d`` summaries (the kernelized forward of
``kernel_attention.py``), which the layer (``attention_kerformer.py``) calls, and its naive O(N^2) form, which builds
Eq. 9's N x N matrix for the tests.

Both take the projections ``query``, ``key``, ``value [B, h, N, d]``, ``padding_mask [B, N]`` (True at real tokens)
or None, and SE-K's ``se_mode`` and ``se_weights`` (:func:`reweight_keys`).
"""

from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F

from .attention_base import AttentionOutput, EfficientAttention
from .kernel_attention import kernelized_attention
from .masking import token_ranks, zero_pads

SEWeights = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]


def reweight_keys(keys: torch.Tensor, padding_mask: torch.Tensor | None, se_mode: str,
                  se_weights: SEWeights | None) -> torch.Tensor:
    """SE-K (Sec. 3.5): ``keys [B, h, N, d]`` (softmaxed, zero at pads) times ``sigmoid(W_2 (W_1 p + b_1) + b_2)``
    (no ReLU) of their mean ``p`` over the real tokens, ``W_2`` with a row per token rank ("token") or per channel
    ("channel"); ``se_weights``: ``(W_1, b_1, W_2, b_2)``, or None."""
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
                       se_weights: SEWeights | None) -> tuple[torch.Tensor, torch.Tensor]:
    """``phi(Q) = sigmoid(Q)`` (Eq. 7) and ``K' = SE-K(varphi(K))``, ``varphi`` a softmax over d (Eq. 8), zero at
    pads: each ``[B, h, N, d]``."""
    keys = zero_pads(torch.softmax(key, dim=-1), padding_mask, token_dim=2)
    return torch.sigmoid(query), reweight_keys(keys, padding_mask, se_mode, se_weights)


def kerformer_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                        padding_mask: torch.Tensor | None, se_mode: str, se_weights: SEWeights | None, eps: float,
                        key_dropout: Callable[[torch.Tensor], torch.Tensor | None] | None = None,
                        summary_chunk: int = 512, output_attentions: bool = False):
    """Eq. 9, ``out_i = phi(q_i) (sum_j K'_j^T v_j) / (phi(q_i) . sum_j K'_j + eps)``, by :func:`kernelized_attention`
    (its arguments too): the context ``[B, h, N, d]``, and ``A [B, h, N, N]`` or None."""
    query_features, key_features = kerformer_features(query, key, padding_mask, se_mode, se_weights)
    return kernelized_attention(query_features, key_features, value, lambda sums: sums + eps, key_dropout,
                                summary_chunk, output_attentions)


def naive_kerformer_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                              padding_mask: torch.Tensor | None, se_mode: str, se_weights: SEWeights | None,
                              eps: float) -> AttentionOutput:
    """Kerformer with its N x N matrix built (Gan et al. 2023), for the tests: ``phi = sigmoid`` (Eq. 7),
    ``varphi = softmax`` over d (Eq. 8), SE-K (Sec. 3.5), ``A_ij = phi(q_i) . k'_j / (sum_j phi(q_i) . k'_j + eps)``
    over the real keys (Eqs. 4-5, 9). Returns ``AttentionOutput``: ``A V [B, N, C]`` (meaningless at pads), ``A``."""
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
