"""Local attention: exact softmax over a sliding window (and optional global tokens), with no global part.

The window-only baseline beside which every hybrid is measured: what a mechanism adds beyond its local window
(``local_window`` on any mechanism) is what that hybrid gains over this one. Each token attends to the real tokens
at most ``local_window // 2`` ranks away (ModernBERT's and Longformer's sliding window, bidirectional) and to the
first ``global_tokens`` real tokens, which themselves attend to every token (Longformer's global attention on
[CLS]). The computation, in blocks and in rank order, is ``local_window.py``'s.

Papers: Beltagy et al., Longformer (2020), Sec. 3.1 (sliding window and global attention); ModernBERT (Warner et
al., 2024) uses a 128-token window in two of every three layers.

Cost: O(N (w + g) d) time and memory, with w the window and g the global tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

from .attention_base import AttentionOutput, AttentionSettings, EfficientAttention, require, setting
from .attention_registry import register_attention


@dataclass(frozen=True)
class LocalSettings(AttentionSettings):
    """``local_window``: w, each token sees the real tokens at most ``w // 2`` ranks away (ModernBERT: 128).
    ``global_tokens``: the first g real tokens attend to, and are attended by, every token."""

    local_window: int = setting(128, int, minimum=2)

    def check_window(self, max_length):
        require(self.local_window_every == 1, "local_window_every", self.local_window_every,
                "1 for the window alone (a layer of 'local' without its window would attend to nothing): for a window "
                "in some layers only, put it beside a mechanism")
        super().check_window(max_length)


@register_attention("local")
class LocalAttention(EfficientAttention):
    """Sliding-window softmax attention, bidirectional, with optional global tokens; no global part."""

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
    complexity = "O(N (w + g) d) time and memory"
    initial_mechanism_weight = None  # the window is the whole attention: no mechanism beside it

    def attend(self, hidden_states, padding_mask=None, state=None, output_attentions=False,
               projections=None) -> AttentionOutput:
        window = self.window.attend(*(projections or self.project(hidden_states)), padding_mask, self.dropout,
                                    output_attentions)
        return AttentionOutput(self.merge_heads(window.context), attentions=window.attentions)

    def attend_with_window(self, hidden_states, padding_mask=None, state=None,
                           output_attentions=False) -> AttentionOutput:
        return self.attend(hidden_states, padding_mask, state, output_attentions)
