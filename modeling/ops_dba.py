"""DBA's attention as functions on tensors: the fast op, through ``d_p`` compressed rows, which the layer
(``attention_dba.py``) calls, and its naive O(N^2) form, which builds the N x N matrix ``W'_r P' W'_c^T`` (for the
tests: no layer calls it).

Shapes: B sequences of N tokens, h heads of width d, C = h d, ``d_p`` compressed rows, ``d_in_h`` compressed width per
head; ``padding_mask [B, N]`` bool, True at real tokens, or None. Both forms take the layer's projections and weights
as tensors: ``query``, ``key``, ``value [B, h, N, d]``; Z ``[B, d_p, C]`` (the learned parameter or the previous
layer's compressed queries); R ``[h, d, d_in_h]``; the logits of the reconstructions, ``X U_r`` and ``X U_c``, each
``[B, h, N, d_p]``.
"""

from __future__ import annotations

import math
from typing import Callable

import torch

from .attention_base import AttentionOutput, EfficientAttention
from .masking import masked_softmax


def heads_of(x: torch.Tensor, heads: int) -> torch.Tensor:
    """``[B, n, h * w] -> [B, h, n, w]``."""
    return x.unflatten(-1, (heads, -1)).transpose(1, 2)


def compress(z: torch.Tensor, x: torch.Tensor, keep: torch.Tensor | None) -> torch.Tensor:
    """``softmax over N (Z x^T / sqrt(d)) x`` (Eqs. 11-12, pads excluded): ``z [B, h, d_p, d]``, ``x [B, h, N, d]`` ->
    ``[B, h, d_p, d]``."""
    weights = masked_softmax(torch.matmul(z, x.transpose(-1, -2)) * x.shape[-1] ** -0.5, keep, dim=-1)
    return torch.matmul(weights, x)


def dba_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, compression_input: torch.Tensor,
                  hidden_compression: torch.Tensor, row_logits: torch.Tensor, column_logits: torch.Tensor,
                  padding_mask: torch.Tensor | None = None,
                  dropout: Callable[[torch.Tensor], torch.Tensor] | None = None, output_attentions: bool = False):
    """Attention among the compressed rows, read out to the tokens (arguments: the module docstring; ``dropout``:
    applied to ``P'`` before it meets the values, None: none).

    Returns the context ``W'_r (P' (W'_c^T V))`` ``[B, N, C]`` (heads merged), the compressed queries ``Q_l`` (heads
    merged, ``[B, d_p, C]``: the next layer's Z) and, with ``output_attentions``, the matrix ``W'_r P' W'_c^T`` ``[B,
    h, N, N]`` (else None).

    R is applied to the merged heads as one block-diagonal ``[C, d_in]`` matrix, a plain matrix product: the per-head
    form ``[B, h, d_p, d] @ [h, d, d_in_h]`` broadcasts the parameter over the batch, which ``torch.export`` traced at
    batch 1 fixes to batch 1 (its reshape of the broadcast parameter guards on the batch size)."""
    heads = query.shape[1]
    keep = None if padding_mask is None else padding_mask[:, None, None, :]
    z = heads_of(compression_input, heads)
    compressed_query = EfficientAttention.merge_heads(compress(z, query, keep))  # Q_l, [B, d_p, C]
    compressed_key = EfficientAttention.merge_heads(compress(z, key, keep))  # K_l, [B, d_p, C]
    block_diagonal = torch.block_diag(*hidden_compression)  # [C, d_in]
    query_dba = heads_of(torch.matmul(compressed_query, block_diagonal), heads)  # [B, h, d_p, d_in_h]
    key_dba = heads_of(torch.matmul(compressed_key, block_diagonal), heads)
    core = torch.softmax(torch.matmul(query_dba, key_dba.transpose(-1, -2)) * query_dba.shape[-1] ** -0.5, dim=-1)
    columns = masked_softmax(column_logits.transpose(-1, -2), keep, dim=-1)  # W'_c^T, [B, h, d_p, N]
    rows = torch.softmax(row_logits, dim=-1)  # W'_r
    value_dba = torch.matmul(columns, value)
    dropped = core if dropout is None else dropout(core)
    context = torch.matmul(rows, torch.matmul(dropped, value_dba))
    attentions = rows @ core @ columns if output_attentions else None
    return EfficientAttention.merge_heads(context), compressed_query, attentions


def naive_dba_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, compression_input: torch.Tensor,
                        hidden_compression: torch.Tensor, row_logits: torch.Tensor, column_logits: torch.Tensor,
                        padding_mask: torch.Tensor | None = None) -> AttentionOutput:
    """DBA, paper form, with its N x N attention matrix built and applied (Qin et al. 2022, Secs. 3.1-3.3; arguments:
    the module docstring).

    Eqs. 11-12: ``W_r = softmax_N(Z Q^T / sqrt(d))``, ``W_c = softmax_N(Z K^T / sqrt(d))`` over the real tokens;
    Sec. 3.2: ``Q_DBA = (W_r Q) R``, ``K_DBA = (W_c K) R``, R per head; Eq. 10: ``P' = softmax(Q_DBA K_DBA^T /
    sqrt(d_in_h))``; Sec. 3.3: ``W'_c = softmax_N(X U_c)`` over the real tokens, ``W'_r = softmax_{d_p}(X U_r)``;
    Eq. 6: ``A = W'_r P' W'_c^T``, ``context = A V``.

    Returns the layer's output (``attention_base.AttentionOutput``): the context ``[B, N, C]`` (its rows at pads
    meaningless), the state ``W_r Q`` (heads merged, ``[B, d_p, C]``) and ``A [B, h, N, N]``."""
    batch, heads, length, head_dim = query.shape
    real = torch.ones(batch, length, dtype=torch.bool) if padding_mask is None else padding_mask
    hidden = real[:, None, None, :].logical_not()  # [B, 1, 1, N]: the pads, hidden from every softmax over N
    z = compression_input.reshape(batch, -1, heads, head_dim).permute(0, 2, 1, 3)  # [B, h, d_p, d]
    row_compression = torch.softmax((z @ query.transpose(-1, -2) / math.sqrt(head_dim)).masked_fill(
        hidden, -math.inf), dim=-1)  # W_r
    column_compression = torch.softmax((z @ key.transpose(-1, -2) / math.sqrt(head_dim)).masked_fill(
        hidden, -math.inf), dim=-1)  # W_c
    compressed_query = row_compression @ query  # [B, h, d_p, d]
    query_dba = torch.einsum("bhpd,hde->bhpe", compressed_query, hidden_compression)
    key_dba = torch.einsum("bhpd,hde->bhpe", column_compression @ key, hidden_compression)
    core = torch.softmax(query_dba @ key_dba.transpose(-1, -2) / math.sqrt(query_dba.shape[-1]), dim=-1)  # P'
    columns = torch.softmax(column_logits.masked_fill(hidden.transpose(-1, -2), -math.inf), dim=2)  # W'_c [B,h,N,d_p]
    rows = torch.softmax(row_logits, dim=-1)  # W'_r
    attention = rows @ core @ columns.transpose(-1, -2)
    state = compressed_query.permute(0, 2, 1, 3).reshape(batch, -1, heads * head_dim)
    return AttentionOutput(EfficientAttention.merge_heads(attention @ value), state, attentions=attention)
