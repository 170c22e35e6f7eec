"""The ``local`` attention: the exact local part alone, no mechanism beside it.

Bidirectional sliding-window softmax attention (Longformer's, ModernBERT's 128-token window: its default), or softmax
inside aligned blocks (with the checkpoint's own length, the checkpoint reading its input in chunks, as one model),
with optional global tokens: the model's local part (``local_settings.py``), built beside this class by the encoder
layer (``hybrid_attention.py``), is its whole attention. The baseline beside which every hybrid is measured: what a
mechanism adds beyond its local part is what that hybrid gains over this one.

Papers: Beltagy et al., Longformer (2020), Sec. 3.1 (sliding window and global attention); ModernBERT (Warner et
al., 2024) uses a 128-token window in two of every three layers.

Cost: O(N (w + g) d) time and memory, with w the window (or block) and g the global tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

from .attention_base import AttentionOutput, EfficientAttention
from .attention_registry import register_attention, register_settings
from .attention_settings import AttentionSettings


@register_settings("local")
@dataclass(frozen=True)
class LocalSettings(AttentionSettings):
    """No settings of its own: the model's local part is the attention (by default ModernBERT's 128-token window)."""

    local_part_role = "alone"


@register_attention("local")
class LocalAttention(EfficientAttention):
    """The model's local part alone, no mechanism: runs ``self.window.attend``."""

    settings_class = LocalSettings
    paper = "Beltagy et al., Longformer: The Long-Document Transformer, arXiv:2004.05150 (2020)"
    paper_url = "https://arxiv.org/abs/2004.05150"
    equations = "Sec. 3.1: sliding window attention, global attention"
    citation = """@misc{beltagy2020longformer,
  title = {Longformer: The Long-Document Transformer},
  author = {Beltagy, Iz and Peters, Matthew E. and Cohan, Arman},
  eprint = {2004.05150},
  archivePrefix = {arXiv},
  year = {2020}
}"""
    complexity = "O(N (w + g) d) time and memory, with w the window (or block) and g the global tokens"

    def attend(self, hidden_states, padding_mask=None, state=None, output_attentions=False,
               projections=None) -> AttentionOutput:
        local = self.window.attend(*(projections or self.project(hidden_states)), padding_mask, self.dropout,
                                   output_attentions)
        return AttentionOutput(self.merge_heads(local.context), attentions=local.attentions)
