"""DBA: dynamic bilinear low-rank attention, compressing both the sequence and the head width.

Paper, equations and citation: ``DBAAttention.paper``, ``.equations``, ``.citation``. The op and its naive O(N^2)
form: ``ops_dba.py`` (``dba_attention``, ``naive_dba_attention``).

Per head, with ``Z`` the ``d_p``-row compression input of this layer (split into heads) and
``d_in_h = d_in / h``::

    W_r = softmax over N of (Z Q^T / sqrt(d)),  W_c = softmax over N of (Z K^T / sqrt(d))   (Eqs. 11-12)
    Q_l = W_r Q,  K_l = W_c K                                              [B, h, d_p, d]
    Q_DBA = Q_l R,  K_DBA = K_l R              R: learned d -> d_in_h      [B, h, d_p, d_in_h]  (Sec. 3.2)
    W'_c = softmax over N of (X U_c)           U_c: C -> d_p per head      [B, h, N, d_p]
    V_DBA = W'_c^T V                                                       [B, h, d_p, d]       (Eq. 8)
    W'_r = softmax over d_p of (X U_r)         U_r: C -> d_p per head      [B, h, N, d_p]
    out  = W'_r softmax(Q_DBA K_DBA^T / sqrt(d_in_h)) V_DBA                [B, h, N, d]         (Eq. 10)

``Z`` is a learned ``[d_p, C]`` parameter in the first layer (``layer_idx == 0``); every layer hands
its compressed queries ``Q_l`` (heads merged, ``[B, d_p, C]``) on as the next layer's ``Z``
("propagating through different attention layers", Sec. 3.3), with no residual or norm, as in the
authors' code. The attention matrix this implies is ``W'_r P W'_c^T``.

Choices (also on docs/mechanisms/dba.md): the paper form with separate Q, K, V compressions (keeps pretrained
projections meaningful), not the authors' time-series variant; the compression logits are scaled by
``1/sqrt(d)`` as the authors' code does (the paper is silent); ``W'_c`` is normalised by a masked
softmax over N (an unnormalised sum would grow with N); ``W'_r`` by a softmax over ``d_p``, as in the
authors' code; ``R`` maps each head apart (one ``d x d_in_h`` map per head). Pads are
excluded from every softmax over N, so any length works without fixed padding.

Dropout (``attention_probs_dropout_prob``): on the core probabilities ``P'_phi`` (the standard place, the
softmax probabilities; the paper names none).

Cost: O(N d_p C) time, O(N d_p h) memory.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from transformers import initialization as init

from .attention_base import AttentionOutput, EfficientAttention
from .attention_settings import AttentionSettings, require, setting
from .attention_registry import register_attention, register_settings
from .ops_dba import dba_attention


@register_settings("dba")
@dataclass(frozen=True)
class DBASettings(AttentionSettings):
    """``compressed_length``: d_p, rows of the compressed sequence (Table 7: 16).
    ``compressed_dim``: d_in, total width of the compressed queries/keys over all heads (Table 7: 24);
    must be divisible by the number of heads."""

    compressed_length: int = setting(16, int, minimum=1)
    compressed_dim: int = setting(24, int, minimum=1)

    def check(self, hidden_size, num_heads, max_length):
        require(self.compressed_dim % num_heads == 0, "compressed_dim", self.compressed_dim,
                f"a positive multiple of num_attention_heads={num_heads} (for example {2 * num_heads})")


@register_attention("dba")
class DBAAttention(EfficientAttention):
    """Dynamic bilinear low-rank attention; ``state`` is the compression input Z ``[B, d_p, C]``."""

    settings_class = DBASettings
    paper = "Qin et al., DBA: Efficient Transformer with Dynamic Bilinear Low-Rank Attention, arXiv:2211.16368 (2022)"
    paper_url = "https://arxiv.org/abs/2211.16368"
    equations = "Secs. 3.1-3.3, Eqs. 6-12"
    citation = """@misc{qin2022dba,
  title = {{DBA}: Efficient Transformer with Dynamic Bilinear Low-Rank Attention},
  author = {Qin, Bosheng and Li, Juncheng and Tang, Siliang and Zhuang, Yueting},
  eprint = {2211.16368},
  archivePrefix = {arXiv},
  year = {2022}
}"""
    complexity = "O(N d_p C) time, O(N d_p h) memory"
    carries_state = True

    def __init__(self, hidden_size, num_heads, settings, **kwargs):
        super().__init__(hidden_size, num_heads, settings, **kwargs)
        length, heads = settings.compressed_length, num_heads
        self.compressed_head_dim = settings.compressed_dim // heads
        self.hidden_compression = nn.Parameter(torch.empty(heads, self.head_dim, self.compressed_head_dim))  # R
        self.row_reconstruction = nn.Linear(hidden_size, heads * length)  # U_r, gives W'_r
        self.column_reconstruction = nn.Linear(hidden_size, heads * length)  # U_c, gives W'_c
        if self.layer_idx == 0:
            self.compression_input = nn.Parameter(torch.empty(length, hidden_size))  # the first layer's Z
        self.reset_parameters()

    def reset_parameters(self, std: float = 0.02) -> None:
        init.normal_(self.hidden_compression, std=self.head_dim**-0.5)
        if self.layer_idx == 0:
            init.normal_(self.compression_input, std=std)

    def compression_input_of(self, state, batch: int) -> torch.Tensor:
        """This layer's Z, ``[B, d_p, C]``: the previous layer's ``Q_l`` or, in the first layer, the parameter."""
        if state is not None:
            return state
        if self.layer_idx != 0:
            raise ValueError(
                f"DBA layer {self.layer_idx} needs the previous layer's compressed queries as `state`; "
                "only the first layer (layer_idx=0) owns the learned Z."
            )
        return self.compression_input.expand(batch, -1, -1)

    def reconstruction(self, layer: nn.Linear, hidden_states: torch.Tensor) -> torch.Tensor:
        """Logits of ``W'`` from the layer input, ``[B, h, N, d_p]``."""
        return self.split_heads(layer(hidden_states))

    def attend(self, hidden_states, padding_mask=None, state=None, output_attentions=False,
               projections=None) -> AttentionOutput:
        query, key, value = projections or self.project(hidden_states)
        context, compressed_query, attentions = dba_attention(
            query, key, value, self.compression_input_of(state, hidden_states.shape[0]), self.hidden_compression,
            self.reconstruction(self.row_reconstruction, hidden_states),
            self.reconstruction(self.column_reconstruction, hidden_states), padding_mask, self.dropout,
            output_attentions)
        return AttentionOutput(context, state=compressed_query, attentions=attentions)
