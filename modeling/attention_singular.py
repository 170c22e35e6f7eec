"""Singularformer: attention through a learned SVD of the attention matrix.

Paper, equations and citation: ``SingularformerAttention.paper``, ``.equations``, ``.citation``. The op and its naive
O(N^2) form: ``ops_singularformer.py`` (``singularformer_attention``, ``naive_singularformer_attention``).

One shared projection gives the logits of both singular-vector matrices (Eq. 14)::

    P         = X W_a + b_a                                   [B, N, r]
    alpha_hat = softmax over N of P^T   (pads excluded)       [B, r, N]   pools N tokens into r
    alpha     = softmax over r of P                           [B, N, r]   unpools r back to N

Per head (Eq. 18), with ``S`` the ``r x r`` score matrix::

    Q~, K~, V~ = alpha_hat Q, alpha_hat K, alpha_hat V         [B, h, r, d]
    S          = Q~ K~^T / sqrt(d)  (+ previous layer's S)     [B, h, r, r]
    A'         = softmax(S)                                    (Eq. 9)
    H          = alpha (A' V~)                                 [B, h, N, d]

The attention matrix this implies is ``alpha A' alpha_hat`` (N x N, never built in ``forward``).

Choices (also on docs/mechanisms/singularformer.md):

* ``pool_before_projection=True`` pools X before the Q/K/V projections, as the authors' code does;
  equal in exact arithmetic to pooling Q, K and V (rows of ``alpha_hat`` sum to one and the
  projections are affine) and cheaper.
* ``residual_attention=True`` adds the previous layer's pre-softmax scores S (RealFormer, Sec. 3.1);
  they accumulate through the stack, carried as ``state``.
* Auxiliary losses (Eqs. 15-17), training only, pads excluded. Eq. 15's second term is the
  ``r x r`` Gram matrix of the pooling matrix (the paper's ``alpha_V alpha_V^T`` would be N x N)::

      L_orth = ||(alpha_hat alpha_hat^T) o (1 - I)||_F^2 / r^2 + ||(alpha^T alpha) o (1 - I)||_F^2 / r^2
      L_diag = ||A' o (1 - I)||_F^2 / r^2

  averaged over batch and heads; this layer returns ``gamma_1 L_orth + gamma_2 L_diag`` and the
  encoder takes the plain mean over layers.

Dropout (``attention_probs_dropout_prob``): on the core probabilities ``A'``, the standard place (the paper
gives dropout rates for the embeddings and hidden layers only).

Cost: O(N r C) time and O(N r) memory beyond the projections; ``r`` defaults to the head width.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from .attention_base import AttentionOutput, EfficientAttention
from .attention_settings import AttentionSettings, setting
from .attention_registry import register_attention, register_settings
from .ops_singularformer import singular_vectors, singularformer_attention, singularformer_aux_loss


@register_settings("singularformer")
@dataclass(frozen=True)
class SingularformerSettings(AttentionSettings):
    """``rank``: r, the number of pseudo-tokens (None: the head width, as the paper fixes it).
    ``residual_attention``: add the previous layer's scores (Sec. 3.1).
    ``gamma_orthogonal`` / ``gamma_diagonal``: weights of Eqs. 15 and 16 in Eq. 17 (Table 2: 0.01).
    ``pool_before_projection``: pool X rather than Q, K, V (the authors' code)."""

    rank: int | None = setting(None, int, minimum=1, none_means="the head width")
    residual_attention: bool = setting(True, bool)
    gamma_orthogonal: float = setting(0.01, float, minimum=0)
    gamma_diagonal: float = setting(0.01, float, minimum=0)
    pool_before_projection: bool = setting(True, bool)


@register_attention("singularformer")
class SingularformerAttention(EfficientAttention):
    """Learned-SVD attention; ``state`` is the previous layer's score matrix S ``[B, h, r, r]``."""

    settings_class = SingularformerSettings
    paper = ("Wu et al., Singularformer: Learning to Decompose Self-Attention to Linearize the Complexity of "
             "Transformer, IJCAI 2023")
    paper_url = "https://doi.org/10.24963/ijcai.2023/493"
    equations = "Sec. 3.1, Eqs. 8-18 (aux losses 15-17)"
    citation = """@inproceedings{wu2023singularformer,
  title = {Singularformer: Learning to Decompose Self-Attention to Linearize the Complexity of Transformer},
  author = {Wu, Yifan and Kan, Shichao and Zeng, Min and Li, Min},
  booktitle = {Proceedings of the Thirty-Second International Joint Conference on Artificial Intelligence, {IJCAI-23}},
  pages = {4433--4441},
  year = {2023},
  doi = {10.24963/ijcai.2023/493}
}"""
    complexity = "O(N r C) time, O(N r) memory"
    carries_state = True
    has_aux_loss = True

    def __init__(self, hidden_size, num_heads, settings, **kwargs):
        super().__init__(hidden_size, num_heads, settings, **kwargs)
        self.rank = settings.rank or self.head_dim
        self.pooling = nn.Linear(hidden_size, self.rank)  # W_a, b_a of Eq. 14

    def pooled_qkv(self, hidden_states, alpha_hat, projections=None):
        """Pseudo-token queries, keys and values, each ``[B, h, r, d]``; ``projections``: the tokens' own
        ``[B, h, N, d]``, when the caller has them (then they are pooled)."""
        if projections is None and self.settings.pool_before_projection:
            pooled = torch.matmul(alpha_hat, hidden_states)
            return tuple(self.split_heads(proj(pooled)) for proj in (self.query, self.key, self.value))
        projections = projections or self.project(hidden_states)
        return tuple(torch.matmul(alpha_hat[:, None], x) for x in projections)

    def attend(self, hidden_states, padding_mask=None, state=None, output_attentions=False,
               projections=None) -> AttentionOutput:
        settings = self.settings
        alpha_hat, alpha = singular_vectors(self.pooling(hidden_states), padding_mask)
        query, key, value = self.pooled_qkv(hidden_states, alpha_hat, projections)
        previous_scores = state if settings.residual_attention else None
        context, scores, core = singularformer_attention(query, key, value, alpha, previous_scores, self.dropout)
        aux_loss = None
        if self.training:
            aux_loss = singularformer_aux_loss(alpha_hat, alpha, core, padding_mask, settings.gamma_orthogonal,
                                               settings.gamma_diagonal)
        attentions = alpha[:, None] @ core @ alpha_hat[:, None] if output_attentions else None
        return AttentionOutput(context, state=scores if settings.residual_attention else None, aux_loss=aux_loss,
                               attentions=attentions)
