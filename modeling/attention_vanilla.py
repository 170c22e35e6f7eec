"""Vanilla softmax attention, the reference and the baseline: ``softmax(Q K^T / sqrt(d)) V``.

Two registered names with RoBERTa's and ViT's exact arithmetic (scores scaled by ``d^-1/2``, pads
filled with the dtype's lowest value, softmax in float32, dropout on the probabilities):

* ``eager``: the matrix product written out; the only one that can return the attention matrix.
* ``sdpa``: ``torch.nn.functional.scaled_dot_product_attention``, which picks a fused kernel.

Cost: O(N^2) time and, for ``eager``, O(N^2) memory.

Both also compute in chunks of queries when ``max_chunk_scores`` is set (:meth:`EagerAttention.chunked_context`):
each query's softmax is over all the keys, so every chunk is exact, and no more than ``max_chunk_scores`` scores
``[B, h, rows, N]`` are held at once, whatever kernel PyTorch picks. Attention transfer's teacher runs so on long
inputs (``hf_effattn.conversion.transfer.teacher``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .attention_base import AttentionOutput, EfficientAttention
from .attention_registry import register_attention, register_settings
from .attention_settings import AttentionSettings
from .masking import scaled_softmax


@register_settings("eager", "sdpa")
@dataclass(frozen=True)
class SoftmaxSettings(AttentionSettings):
    """No settings of its own, and no local part: softmax attention is exact over every token."""

    local_part_role = None


@register_attention("eager")
class EagerAttention(EfficientAttention):
    """Softmax attention written out; returns the ``[B, h, N, N]`` probabilities when asked."""

    settings_class = SoftmaxSettings
    paper = "Vaswani et al., Attention Is All You Need, NeurIPS 2017"
    equations = "Eq. 1"
    citation = r"""@inproceedings{vaswani2017attention,
  title = {Attention Is All You Need},
  author = {Vaswani, Ashish and Shazeer, Noam and Parmar, Niki and Uszkoreit, Jakob and Jones, Llion and
            Gomez, Aidan N. and Kaiser, {\L}ukasz and Polosukhin, Illia},
  booktitle = {Proceedings of the 31st International Conference on Neural Information Processing Systems},
  pages = {6000--6010},
  year = {2017}
}"""
    complexity = "O(N^2 d) time, O(N^2) memory"
    max_chunk_scores: int | None = None  # set: chunks of queries of at most this many scores each

    def probabilities(self, query: torch.Tensor, key: torch.Tensor, padding_mask: torch.Tensor | None) -> torch.Tensor:
        """``softmax(Q K^T / sqrt(d))`` over real keys, ``[B, h, N, N]``."""
        keep = None if padding_mask is None else padding_mask[:, None, None, :]
        return scaled_softmax(query, key, keep).to(query.dtype)

    def chunked_context(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                        padding_mask: torch.Tensor | None) -> torch.Tensor:
        """``softmax(Q K^T / sqrt(d)) V`` ``[B, h, N, d]`` in chunks of queries, each of at most ``max_chunk_scores``
        scores ``[B, h, rows, N]`` (at least one query)."""
        batch, heads, keys, _ = key.shape
        rows = max(1, self.max_chunk_scores // (batch * heads * keys))
        mask = None if padding_mask is None else padding_mask[:, None, None, :]
        dropout = self.dropout.p if self.training else 0.0
        return torch.cat([F.scaled_dot_product_attention(queries, key, value, attn_mask=mask, dropout_p=dropout,
                                                         scale=self.head_dim**-0.5)
                          for queries in query.split(rows, dim=2)], dim=2)

    def attend(self, hidden_states, padding_mask=None, state=None, output_attentions=False,
               projections=None) -> AttentionOutput:
        query, key, value = projections or self.project(hidden_states)
        if self.max_chunk_scores is not None and not output_attentions:
            return AttentionOutput(self.merge_heads(self.chunked_context(query, key, value, padding_mask)))
        probs = self.probabilities(query, key, padding_mask)
        context = torch.matmul(self.dropout(probs), value)
        return AttentionOutput(self.merge_heads(context), attentions=probs if output_attentions else None)


@register_attention("sdpa")
class SdpaAttention(EagerAttention):
    """Softmax attention via PyTorch's fused ``scaled_dot_product_attention``."""

    complexity = "O(N^2 d) time, O(N) memory with a fused kernel"

    def attend(self, hidden_states, padding_mask=None, state=None, output_attentions=False,
               projections=None) -> AttentionOutput:
        if output_attentions or self.max_chunk_scores is not None:
            return super().attend(hidden_states, padding_mask, state, output_attentions, projections)
        query, key, value = projections or self.project(hidden_states)
        mask = None if padding_mask is None else padding_mask[:, None, None, :]
        context = F.scaled_dot_product_attention(
            query, key, value, attn_mask=mask, dropout_p=self.dropout.p if self.training else 0.0,
            scale=self.head_dim**-0.5,
        )
        return AttentionOutput(self.merge_heads(context))
