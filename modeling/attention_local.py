"""Local attention: exact softmax over a sliding window or aligned blocks (and optional global tokens), with no
global part.

The window-only baseline beside which every hybrid is measured: what a mechanism adds beyond its local window
(``local_window`` on any mechanism) is what that hybrid gains over this one. Each token attends to the real tokens
at most ``local_window // 2`` ranks away (ModernBERT's and Longformer's sliding window, bidirectional) and to the
first ``global_tokens`` real tokens, which themselves attend to every token (Longformer's global attention on
[CLS]). The computation, in blocks and in rank order, is ``local_window.py``'s. With ``local_block`` instead, each
token attends to its own aligned block of ``local_block`` real tokens (``local_blocks.py``): with the checkpoint's
own length, that is the checkpoint reading the input in chunks, as one model (the control of every block hybrid).

Papers: Beltagy et al., Longformer (2020), Sec. 3.1 (sliding window and global attention); ModernBERT (Warner et
al., 2024) uses a 128-token window in two of every three layers.

Cost: O(N (w + g) d) time and memory, with w the window and g the global tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

from .attention_base import AttentionOutput, EfficientAttention
from .attention_settings import AttentionSettings, require, setting
from .attention_registry import register_attention, register_settings

DEFAULT_WINDOW = 128  # ModernBERT's


@register_settings("local")
@dataclass(frozen=True)
class LocalSettings(AttentionSettings):
    """``local_window``: w, each token sees the real tokens at most ``w // 2`` ranks away (ModernBERT: 128, the
    default unless ``local_block`` is set). ``local_block``: S, each token sees the real tokens of its own aligned
    block of S instead (with S the checkpoint's own length: the chunked reader). ``global_tokens``: the first g real
    tokens attend to, and are attended by, every token."""

    local_window: int | None = setting(None, int, minimum=2, none_means="128, unless local_block is set")

    def __post_init__(self):
        super().__post_init__()
        if self.local_window is None and self.local_block is None:
            object.__setattr__(self, "local_window", DEFAULT_WINDOW)

    def check_window(self, max_length):
        require(self.local_window_every == 1, "local_window_every", self.local_window_every,
                "1 for the window alone (a layer of 'local' without its window would attend to nothing): for a window "
                "in some layers only, put it beside a mechanism")
        require(self.initial_mechanism_weight is None, "initial_mechanism_weight", self.initial_mechanism_weight,
                "None for 'local', which has no mechanism beside its local part")
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
    window_mechanism_weight = block_mechanism_weight = None  # the local part is the whole attention: no mechanism

    def attend(self, hidden_states, padding_mask=None, state=None, output_attentions=False,
               projections=None) -> AttentionOutput:
        window = self.window.attend(*(projections or self.project(hidden_states)), padding_mask, self.dropout,
                                    output_attentions)
        return AttentionOutput(self.merge_heads(window.context), attentions=window.attentions)

    def attend_with_window(self, hidden_states, padding_mask=None, state=None,
                           output_attentions=False) -> AttentionOutput:
        return self.attend(hidden_states, padding_mask, state, output_attentions)
