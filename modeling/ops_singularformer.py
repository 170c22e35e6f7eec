"""Singularformer's attention as functions on tensors: the fast op, through r pseudo-tokens, which the layer
(``attention_singular.py``) calls, and its naive O(N^2) form, which builds the N x N matrix the paper factors (for
the tests: no layer calls it).

Shapes: B sequences of N tokens, h heads of width d, C = h d, r pseudo-tokens; ``padding_mask [B, N]`` bool, True at
real tokens, or None. The fast op runs in three steps, the layer pooling between the first two (X before its
projections, or its queries, keys and values)::

    alpha_hat, alpha = singular_vectors(P, padding_mask)                        Eqs. 10-14
    Q~, K~, V~       = alpha_hat X W_q, ...  or  alpha_hat Q, ...  [B, h, r, d]  (the layer)
    H, S, A'         = singularformer_attention(Q~, K~, V~, alpha, S_prev)      Eqs. 9, 18
    loss             = singularformer_aux_loss(alpha_hat, alpha, A', padding_mask, gamma_1, gamma_2)   Eqs. 15-17
"""

from __future__ import annotations

import math
from typing import Callable

import torch

from .attention_base import AttentionOutput, EfficientAttention
from .masking import masked_softmax, zero_pads


def singular_vectors(logits: torch.Tensor, padding_mask: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """From the shared logits ``P [B, N, r]`` (Eq. 14): ``alpha_hat [B, r, N]``, a softmax over the real tokens (pads
    get zero weight), which pools N tokens into r, and ``alpha [B, N, r]``, a softmax over r, which unpools."""
    keep = None if padding_mask is None else padding_mask[:, None, :]
    return masked_softmax(logits.transpose(1, 2), keep, dim=-1), torch.softmax(logits, dim=-1)


def singularformer_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, alpha: torch.Tensor,
                             previous_scores: torch.Tensor | None = None,
                             dropout: Callable[[torch.Tensor], torch.Tensor] | None = None):
    """Softmax attention among the pseudo-tokens, unpooled to the tokens. ``query``, ``key``, ``value [B, h, r, d]``:
    the pooled projections; ``alpha [B, N, r]``; ``previous_scores [B, h, r, r]``: the previous layer's S, added
    (residual attention), or None; ``dropout``: applied to ``A'`` before it meets the values (None: none).

    Returns the context ``H = alpha merge(A' V~)`` ``[B, N, C]``, the scores ``S = Q~ K~^T / sqrt(d) (+ S_prev)`` and
    ``A' = softmax(S)``, both ``[B, h, r, r]``."""
    scores = torch.matmul(query, key.transpose(-1, -2)) * query.shape[-1] ** -0.5
    if previous_scores is not None:
        scores = scores + previous_scores
    core = torch.softmax(scores, dim=-1)
    dropped = core if dropout is None else dropout(core)
    pooled_context = EfficientAttention.merge_heads(torch.matmul(dropped, value))  # [B, r, C]
    return torch.matmul(alpha, pooled_context), scores, core


def off_diagonal_energy(gram: torch.Tensor) -> torch.Tensor:
    """``||G o (1 - I)||_F^2 / r^2`` for each ``r x r`` matrix in ``gram [..., r, r]`` -> ``[...]``."""
    r = gram.shape[-1]
    total = gram.pow(2).sum((-1, -2))
    diagonal = torch.diagonal(gram, dim1=-2, dim2=-1).pow(2).sum(-1)
    return (total - diagonal) / r**2


def singularformer_aux_loss(alpha_hat: torch.Tensor, alpha: torch.Tensor, core: torch.Tensor,
                            padding_mask: torch.Tensor | None, gamma_orthogonal: float,
                            gamma_diagonal: float) -> torch.Tensor:
    """``gamma_1 L_orth + gamma_2 L_diag`` (Eqs. 15-17), a scalar averaged over batch and heads, pads excluded:
    ``alpha_hat [B, r, N]``, ``alpha [B, N, r]``, ``core`` (A') ``[B, h, r, r]``."""
    alpha = zero_pads(alpha, padding_mask)
    orthogonal = off_diagonal_energy(alpha_hat @ alpha_hat.transpose(1, 2)) + off_diagonal_energy(
        alpha.transpose(1, 2) @ alpha
    )
    return gamma_orthogonal * orthogonal.mean() + gamma_diagonal * off_diagonal_energy(core).mean()


def naive_singularformer_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, logits: torch.Tensor,
                                   padding_mask: torch.Tensor | None = None,
                                   previous_scores: torch.Tensor | None = None, gamma_orthogonal: float = 0.01,
                                   gamma_diagonal: float = 0.01) -> AttentionOutput:
    """Singularformer with its N x N attention matrix built and applied (Wu et al., IJCAI 2023, Sec. 3):
    ``query``, ``key``, ``value [B, h, N, d]``, the tokens' projections; ``logits`` P ``[B, N, r]``;
    ``previous_scores`` S_prev ``[B, h, r, r]`` or None.

    Eq. 14: P; Eq. 10: ``alpha = softmax_r(P)``; Eqs. 11-13: ``alpha_hat = softmax_N(P^T)`` over the real tokens;
    the pseudo-tokens' scores as the tokens' ``Q K^T / sqrt(d)`` pooled on both sides, ``S = alpha_hat (Q K^T /
    sqrt(d)) alpha_hat^T + S_prev`` (Eq. 9, RealFormer's residual); ``A' = softmax(S)``; Eq. 8 / 18: ``A = alpha A'
    alpha_hat``, ``context = A V``. Eqs. 15-17: ``gamma_1 L_orth + gamma_2 L_diag`` with ``(1 - I)`` written out,
    alpha's rows at pads left out, averaged over the batch (and the heads for L_diag).

    Returns the layer's output (``attention_base.AttentionOutput``): the context ``[B, N, C]`` (its rows at pads
    meaningless), the state S ``[B, h, r, r]``, the auxiliary loss and the attention matrix ``A [B, h, N, N]``."""
    real = torch.ones(logits.shape[:2], dtype=torch.bool) if padding_mask is None else padding_mask  # [B, N]
    alpha = torch.softmax(logits, dim=-1)
    alpha_hat = torch.softmax(logits.masked_fill(~real[..., None], -math.inf), dim=1).transpose(1, 2)
    token_scores = query @ key.transpose(-1, -2) / math.sqrt(query.shape[-1])  # [B, h, N, N]
    scores = alpha_hat[:, None] @ token_scores @ alpha_hat[:, None].transpose(-1, -2)
    if previous_scores is not None:
        scores = scores + previous_scores
    core = torch.softmax(scores, dim=-1)
    attention = alpha[:, None] @ core @ alpha_hat[:, None]
    off = 1 - torch.eye(logits.shape[-1], dtype=logits.dtype)
    real_alpha = alpha * real[..., None]

    def energy(gram):
        return (gram * off).pow(2).sum((-1, -2)) / logits.shape[-1] ** 2

    orthogonal = energy(alpha_hat @ alpha_hat.transpose(1, 2)) + energy(real_alpha.transpose(1, 2) @ real_alpha)
    aux_loss = gamma_orthogonal * orthogonal.mean() + gamma_diagonal * energy(core).mean()
    return AttentionOutput(EfficientAttention.merge_heads(attention @ value), scores, aux_loss, attention)
