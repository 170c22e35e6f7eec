"""Linformer: softmax attention over keys and values projected along the sequence to a fixed length k.

Paper: Wang et al., "Linformer: Self-Attention with Linear Complexity", arXiv:2006.04768 (2020), Sec. 4
(Eq. 7; parameter sharing in "Additional Efficiency Techniques").

Two learned projections of the sequence axis, ``E, F: [k, N_max]`` (k = ``projected_length``), map the
keys and values of N tokens to k rows; per head::

    K_p = E K,  V_p = F V                                  [B, h, k, d]
    P   = softmax(Q K_p^T / sqrt(d))                       [B, h, N, k]
    out = P V_p                                            [B, h, N, d]    (Eq. 7)

E and F are shared by the heads (the paper's headwise sharing); with ``share_kv`` (default, the paper's
key-value sharing, its best setting) F = E. The attention matrix this implies is ``P F`` (N x N).

Choices (also on docs/baselines.md):

* Columns of E and F are indexed by each token's rank among the real tokens of its sequence, and pads
  get zero columns: a sequence of L real tokens uses the first L columns, wherever its pads are, so right
  and left padding change nothing (the authors' code also uses the first L columns of its projections).
* ``N_max`` is the model's maximum length (``config.attention_max_length``: for RoBERTa the positions past
  its pad offset, ``max_position_embeddings - pad_token_id - 1``; for ViT the patches plus [CLS]); longer
  inputs are an error (extending it: :meth:`LinformerAttention.extend_length_sized_weights`).
  ``projected_length`` may exceed N_max (it still works, it just compresses nothing).
* E and F act on the projected keys and values, as Eq. 7 writes them; the authors' code projects the layer
  input along the sequence before the key and value projections, which differs only in the bias term.
* E and F start as the authors' code initialises them: Xavier-uniform with gain 1/sqrt(2) (the paper does
  not say).

Dropout (``attention_probs_dropout_prob``): on the probabilities P, as in the authors' code.

Defaults: ``projected_length`` 256 (the paper's main setting, with n = 512), ``share_kv`` True.

Cost: O(N k d) time, O(N k) memory per head.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from transformers import initialization as init

from .attention_base import AttentionOutput, EfficientAttention
from .attention_settings import AttentionSettings, setting
from .attention_registry import register_attention, register_settings
from .masking import token_ranks, zero_pads
from .position_extension import replace_parameter, tile_to_length


@register_settings("linformer")
@dataclass(frozen=True)
class LinformerSettings(AttentionSettings):
    """``projected_length``: k, the rows the keys and values are projected to. ``share_kv``: one projection for
    keys and values (F = E), else two."""

    projected_length: int = setting(256, int, minimum=1)
    share_kv: bool = setting(True, bool)


@register_attention("linformer")
class LinformerAttention(EfficientAttention):
    """Softmax attention over length-projected keys and values; has a fixed maximum length (E and F)."""

    settings_class = LinformerSettings
    paper = "Wang et al., Linformer: Self-Attention with Linear Complexity, arXiv:2006.04768 (2020)"
    paper_url = "https://arxiv.org/abs/2006.04768"
    citation = """@misc{wang2020linformer,
  title = {Linformer: Self-Attention with Linear Complexity},
  author = {Wang, Sinong and Li, Belinda Z. and Khabsa, Madian and Fang, Han and Ma, Hao},
  year = {2020},
  eprint = {2006.04768},
  archivePrefix = {arXiv}
}"""
    equations = "Sec. 4, Eq. 7; headwise and key-value parameter sharing"
    complexity = "O(N k d) time, O(N k) memory"
    needs_max_length = True

    def __init__(self, hidden_size, num_heads, settings, **kwargs):
        super().__init__(hidden_size, num_heads, settings, **kwargs)
        shape = (settings.projected_length, self.max_length)
        self.key_projection = nn.Parameter(torch.empty(shape))  # E
        if not settings.share_kv:
            self.value_projection = nn.Parameter(torch.empty(shape))  # F
        self.reset_parameters()

    def reset_parameters(self, std: float = 0.02) -> None:
        for projection in self.length_projections():
            init.xavier_uniform_(projection, gain=2**-0.5)

    def length_projection_names(self) -> list[str]:
        """The names of ``[E]`` with ``share_kv``, else of ``[E, F]``."""
        return ["key_projection"] + ([] if self.settings.share_kv else ["value_projection"])

    def length_projections(self) -> list[nn.Parameter]:
        """``[E]`` with ``share_kv``, else ``[E, F]``, each ``[k, N_max]``."""
        return [getattr(self, name) for name in self.length_projection_names()]

    def extend_length_sized_weights(self, max_length: int) -> None:
        """E (and F), ``[k, N_max]`` with one column per token rank, grow to ``max_length`` columns by repeating
        their columns cyclically, as the position rows are (:func:`~position_extension.tile_to_length`): rank ``t``
        gets the old rank ``t mod N_max``'s column.

        Exact: on inputs of up to the old ``N_max`` real tokens the output is unchanged (their columns are kept).
        Not exact: on a longer input each of the k projected keys and values sums the tokens of every period of
        ``N_max`` ranks where it summed those of one, so its scale grows with the length / ``N_max``; fine-tune at
        the new length."""
        for name in self.length_projection_names():
            replace_parameter(self, name, tile_to_length(getattr(self, name), max_length, dim=1))

    def token_columns(self, projection: torch.Tensor, padding_mask: torch.Tensor | None, batch: int,
                      length: int) -> torch.Tensor:
        """``[B, 1, k, N]``: the column of ``projection [k, N_max]`` at each token's rank, zero at pads."""
        ranks = token_ranks(padding_mask, batch, length, projection.device)
        columns = zero_pads(F.embedding(ranks, projection.t()), padding_mask)  # [B, N, k]
        return columns.transpose(1, 2)[:, None]

    def attend(self, hidden_states, padding_mask=None, state=None, output_attentions=False,
               projections=None) -> AttentionOutput:
        batch, length, _ = hidden_states.shape
        query, key, value = projections or self.project(hidden_states)
        columns = [self.token_columns(p, padding_mask, batch, length) for p in self.length_projections()]
        key_columns, value_columns = columns[0], columns[-1]  # E and F (the same with share_kv)
        projected_key, projected_value = key_columns @ key, value_columns @ value  # [B, h, k, d]
        probs = torch.softmax(query @ projected_key.transpose(-1, -2) * self.head_dim**-0.5, dim=-1)
        context = self.dropout(probs) @ projected_value
        attentions = probs @ value_columns if output_attentions else None
        return AttentionOutput(self.merge_heads(context), attentions=attentions)
