"""Kernelized attention: the shared forward of the mechanisms whose attention matrix factors through feature maps.

With query features ``phi(Q)`` and key features ``varphi(K)`` (pads zeroed), per head::

    A_ij  = phi(q_i) . varphi(k_j) / normaliser(phi(q_i) . sum_j varphi(k_j))
    out_i = phi(q_i) (sum_j varphi(k_j)^T v_j) / normaliser(phi(q_i) . sum_j varphi(k_j))

computed right to left, so that only ``F x d`` summaries are built (F: the feature width): O(N F d) time and
O(N (F + d)) memory. Past ``summary_chunk`` tokens (512) the summaries are sums of products over chunks of tokens,
and the read-out one product a chunk: a GPU runs one product over all N tokens on a handful of its multiprocessors.
A mechanism gives its features (:meth:`KernelAttention.kernel_features`) and, where its paper or its authors' code
does, its own :meth:`KernelAttention.normaliser` (default: ``+ eps``).

Dropout (``attention_probs_dropout_prob``): in training, whole columns of A are dropped, one Bernoulli draw per
(sequence, head, key token) shared by every query, kept ones scaled by ``1 / (1 - p)``. That is ``A_ij m_j``: the
mask multiplies ``varphi(k_j)`` in the summary ``sum_j varphi(k_j)^T v_j`` only, not in the normaliser, so the cost
stays linear (a per-(i, j) mask would need the N x N matrix).

Beside an exact local part the part's exact softmax terms and the mechanism's terms share one normaliser (LoLCATs,
:meth:`KernelAttention.attend_with_window`), the mechanism's terms weighted per head by a learned sigma, the
exact ones by ``1 - sigma``. Beside a window (``local_window.py``) each exact key adds ``exp(s_ij - max_j s_ij)``,
and the mechanism's terms outside the window are those over every key (its usual summaries) less those at the
window's keys, which the window's blocks give. Beside aligned blocks (``local_blocks.py``) the block's softmax
enters with its own normaliser (its weights sum to 1), and the mechanism's terms outside the query's block are its
summary over every key less its block's: the mechanism is a memory across the blocks. With the setting
``shared_normaliser`` False (:class:`KernelSettings`; the default beside blocks) the mechanism is normalised on its
own instead and mixed per head by the gate, as the mechanisms without feature maps are (``attention_base.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from .attention_base import AttentionOutput, EfficientAttention
from .attention_settings import AttentionSettings, require
from .settings import setting
from .local_blocks import AlignedBlocks, memory_terms
from .local_window import RankOrder, at_least_float32


@dataclass(frozen=True)
class KernelSettings(AttentionSettings):
    """Base of the kernelized mechanisms' settings. ``shared_normaliser``: beside a local part (``local_window`` or
    ``local_block``), True puts the mechanism's terms under the exact part's normaliser (the module docstring);
    False normalises the mechanism on its own and mixes it per head by the gate, ``(1 - sigma) local + sigma
    mechanism``, as the mechanisms without feature maps are, the gate starting where theirs do. None (the default):
    True beside a window (LoLCATs), False beside blocks, whose softmax then stays the chunked reader's, the memory
    added by its gate; :attr:`shares_normaliser` is the value in force."""

    shared_normaliser: bool | None = setting(None, bool, none_means="true beside a window, false beside blocks")

    @property
    def shares_normaliser(self) -> bool:
        """Whether the mechanism's terms go under the local part's normaliser (``shared_normaliser`` resolved)."""
        return self.local_block is None if self.shared_normaliser is None else self.shared_normaliser

    def check_window(self, max_length: int | None) -> None:
        super().check_window(max_length)
        require(self.shared_normaliser is not False or self.local_window is not None or self.local_block is not None,
                "shared_normaliser", self.shared_normaliser, "True or None without a local part (it says how the "
                "mechanism joins a window or blocks): set local_window or local_block")


class KernelAttention(EfficientAttention):
    """Base of the kernelized mechanisms (see the module docstring); subclasses define :meth:`kernel_features`."""

    # Under the local part's normaliser the mechanism's terms add up over every key outside it, so a small start keeps
    # a converted hybrid near its exact part: smaller still beside blocks, where they add up over every other block.
    window_mechanism_weight = 0.01
    block_mechanism_weight = 1e-4
    # Beside a window, the mechanism's terms stand for the keys outside it (LoLCATs), not for every key, so that no key
    # counts twice; False counts the exact keys in both parts.
    mechanism_outside_window: bool = True
    # Tokens per product of the summary over every key and of its read-out, past which they run in chunks
    # (``local_blocks.memory_terms`` says why a GPU wants them).
    summary_chunk = 512

    @classmethod
    def default_gate_start(cls, settings: KernelSettings, blocks: bool) -> float:
        """Under the local part's normaliser, this class's defaults; mixed by the gate (``shares_normaliser``
        False), the mixed mechanisms' (``EfficientAttention``'s)."""
        owner = KernelAttention if settings.shares_normaliser else EfficientAttention
        return owner.block_mechanism_weight if blocks else owner.window_mechanism_weight

    def kernel_features(self, query: torch.Tensor, key: torch.Tensor, padding_mask: torch.Tensor | None):
        """``phi(Q) [B, h, N, F]`` and ``varphi(K) [B, h, N, F]`` (zero at pads) from the projections ``[B, h, N,
        d]``."""
        raise NotImplementedError

    def normaliser(self, similarity_sums: torch.Tensor) -> torch.Tensor:
        """``phi(q_i) . sum_j varphi(k_j)`` ``[B, h, N, 1]`` -> the row normaliser; default ``+ eps``."""
        return similarity_sums + self.settings.eps

    def key_dropout(self, like: torch.Tensor) -> torch.Tensor | None:
        """``[B, h, N, 1]``: which key columns of A attention dropout keeps, scaled by ``1 / (1 - p)`` (see the module
        docstring); None outside training or without dropout. ``like``: any ``[B, h, N, *]`` tensor."""
        if not self.training or self.dropout.p == 0:
            return None
        return self.dropout(like.new_ones(*like.shape[:-1], 1))

    def over_every_key(self, query, dropped, keys, values) -> tuple[torch.Tensor, torch.Tensor]:
        """:func:`terms_over_every_key` in chunks of :attr:`summary_chunk` tokens."""
        return terms_over_every_key(query, dropped, keys, values, self.summary_chunk)

    def attend(self, hidden_states, padding_mask=None, state=None, output_attentions=False,
               projections=None) -> AttentionOutput:
        query, key, value = projections or self.project(hidden_states)
        context, attentions = kernelized_attention(*self.kernel_features(query, key, padding_mask), value,
                                                   self.normaliser, self.key_dropout, self.summary_chunk,
                                                   output_attentions)
        return AttentionOutput(self.merge_heads(context), attentions=attentions)

    def attend_with_window(self, hidden_states, padding_mask=None, state=None,
                           output_attentions=False) -> AttentionOutput:
        """The exact local part (the window or the aligned blocks) and the mechanism under one normaliser: the local
        part's ``attend_beside_kernel`` gives the equation; the global tokens' rows are exact over every token. With
        ``shares_normaliser`` False, mixed per head as the other mechanisms are (the base class's)."""
        if self.parts == "window" or not self.settings.shares_normaliser:
            return super().attend_with_window(hidden_states, padding_mask, state, output_attentions)
        query, key, value = self.project(hidden_states)
        query_features, key_features = (at_least_float32(x) for x in self.kernel_features(query, key, padding_mask))
        weight = self.window.mechanism_weight()[:, None, None]  # [h, 1, 1]
        with torch.autocast(value.device.type, enabled=False):  # sums over N tokens overflow half precision
            context = self.window.attend_beside_kernel(query, key, value, query_features, key_features, padding_mask,
                                                       weight, self)
        attentions = None
        if output_attentions:
            order = RankOrder(padding_mask, query.shape[0], query.shape[2], query.device)
            attentions = self.window.dense_shared_attention(query, key, query_features, key_features, order, weight,
                                                            self.mechanism_outside_window)
        return AttentionOutput(self.merge_heads(context), attentions=attentions)


def terms_over_every_key(query, dropped, keys, values, summary_chunk: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``phi(q_i) sum_j m_j varphi(k_j)^T v_j`` ``[B, h, N, d]`` and ``phi(q_i) . sum_j varphi(k_j)`` ``[B, h, N, 1]``
    from ``[B, h, N, *]`` features (``dropped``: key dropout applied) and values. Past ``summary_chunk`` tokens, as
    per-chunk products summed (``local_blocks.memory_terms``)."""
    if query.shape[2] <= summary_chunk:
        return query @ (dropped.transpose(-1, -2) @ values), query @ keys.sum(2).unsqueeze(-1)
    chunks = AlignedBlocks(None, query.shape[2], summary_chunk, 0, None, masked=False)
    return memory_terms(query, dropped, keys, values, chunks, outside=False)


def kernelized_attention(query_features: torch.Tensor, key_features: torch.Tensor, value: torch.Tensor,
                         normaliser: Callable[[torch.Tensor], torch.Tensor],
                         key_dropout: Callable[[torch.Tensor], torch.Tensor | None] | None = None,
                         summary_chunk: int = 512, output_attentions: bool = False):
    """The forward of every kernelized mechanism, on tensors: ``phi(Q)`` and ``varphi(K)`` ``[B, h, N, F]`` (zero at
    pads), ``value [B, h, N, d]``; ``normaliser``: the similarity sums ``[B, h, N, 1]`` -> the row normaliser;
    ``key_dropout``: features -> the key columns kept ``[B, h, N, 1]`` (scaled) or None (see the module docstring).
    Computed in at least float32, autocast off (sums over N tokens overflow half precision).

    Returns the context ``[B, h, N, d]`` in the values' dtype and, with ``output_attentions``, the matrix ``A [B, h,
    N, N]`` (else None)."""
    with torch.autocast(value.device.type, enabled=False):
        query, keys, values = (at_least_float32(x) for x in (query_features, key_features, value))
        keep = None if key_dropout is None else key_dropout(keys)
        dropped = keys if keep is None else keys * keep
        numerator, similarity_sums = terms_over_every_key(query, dropped, keys, values, summary_chunk)
        row_normaliser = normaliser(similarity_sums)
        context = (numerator / row_normaliser).to(value.dtype)
        attentions = None
        if output_attentions:
            attentions = (torch.matmul(query, keys.transpose(-1, -2)) / row_normaliser).to(value.dtype)
    return context, attentions
