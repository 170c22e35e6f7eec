"""PSF-Attn: a product of parametric sparse factors on Chord links replaces the attention matrix.

Paper: Zhang & Yang, "Sparse factorization of square matrices with application to neural attention
modeling", Neural Networks, Secs. 3-4 (Eqs. 1 and 3).

Chord links (Eq. 1): in a sequence of real length L, token t links to itself and to
``(t + 2^k) mod L`` for ``k = 0 .. K-2``: K links per row. Each of the M factors ``W_m`` has its
non-zeros on those links, produced per token by its own MLP ``f_m`` from the layer input X (Eq. 3)::

    V_0 = g(X)                                              [B, N, C]   (g: the value projection)
    w_m = f_m(X) = Linear(GELU(Linear(X)))                  [B, N, K]
    (W_m V)_t = sum_k w_m[t, k] V[link(t, k)]               a gather, O(N K C)
    out = W_1 (W_2 (... (W_M V_0)))                         (optionally W_m V + V at each step)

The attention matrix this implies is the dense product ``W_1 W_2 ... W_M`` (one head).

Choices (see MECHANISMS.md): links are taken modulo each sequence's real length and counted among
its real tokens, so pads are never reached and left or right padding gives the same result;
``K = M = ceil(log2 N_max)`` by default (``N_max`` the model's maximum length); no softmax and no
scaling, as in the paper, so the factor products run in float32 even under autocast (a product of
many unnormalised factors can overflow in half precision). Query and key projections are not used.
Our initialisation (not in the paper): each factor starts as the identity (self-link weight 1,
others 0, plus small noise from the MLP) so that a deep product neither vanishes nor explodes.

Cost: O(N log^2 N) time, O(N log N) memory.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from transformers import initialization as init

from .attention_base import (
    AttentionOutput, AttentionSettings, EfficientAttention, log2_ceil, register_attention, require,
)
from .masking import real_lengths, real_positions, token_ranks


@dataclass(frozen=True)
class PSFSettings(AttentionSettings):
    """``num_factors``: M (None: ceil(log2 N_max)). ``num_links``: K, links per row including the
    self link (None: ceil(log2 N_max)). ``factor_hidden_size``: hidden width of each f_m (None: the
    model width). ``residual``: ``V <- W_m V + V`` at each factor."""

    num_factors: int | None = None
    num_links: int | None = None
    factor_hidden_size: int | None = None
    residual: bool = False

    def check(self, hidden_size, num_heads, max_length):
        for name in ("num_factors", "num_links", "factor_hidden_size"):
            value = getattr(self, name)
            require(value is None or (isinstance(value, int) and value >= 1), name, value,
                    "a positive integer, or None for the default")
        if self.num_links is not None and max_length:
            require(2 ** (self.num_links - 2) < max_length, "num_links", self.num_links,
                    f"at most {log2_ceil(max_length) + 1} for max_length={max_length} (longest link 2^(K-2) < N_max)")


def chord_links(padding_mask: torch.Tensor | None, batch: int, length: int, num_links: int, device) -> torch.Tensor:
    """``[B, N, K]`` absolute index of each token's K Chord links (Eq. 1), per sequence over its real tokens."""
    offsets = torch.tensor([0] + [2**k for k in range(num_links - 1)], device=device)
    ranks = token_ranks(padding_mask, batch, length, device)  # [B, N]
    lengths = real_lengths(padding_mask, batch, length, device).clamp(min=1)[:, None, None]
    linked_ranks = (ranks[..., None] + offsets) % lengths  # [B, N, K]
    positions = real_positions(padding_mask, batch, length, device)
    return torch.gather(positions, 1, linked_ranks.view(batch, -1)).view(batch, length, num_links)


def link_rows(links: torch.Tensor) -> torch.Tensor:
    """``links [B, N, K]`` (positions within each sequence) -> ``[K, B * N]`` row indices into the values
    flattened to ``[B * N, C]``, one contiguous index vector per link."""
    batch, length, num_links = links.shape
    offsets = torch.arange(batch, device=links.device)[:, None, None] * length
    return (links + offsets).view(batch * length, num_links).t().contiguous()


def chord_mix(values: torch.Tensor, weights: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """``out[i] = sum_k weights[i, k] values[rows[k, i]]``: ``values [R, C]``, ``weights [R, K]``, ``rows [K, R]``
    -> ``[R, C]``, one row gather and one in-place multiply-add per link."""
    mixed = torch.zeros_like(values)
    for k in range(rows.shape[0]):
        mixed.addcmul_(values.index_select(0, rows[k]), weights[:, k, None])
    return mixed


class ChordMix(torch.autograd.Function):
    """:func:`chord_mix` with a hand-written backward that gathers the linked rows again rather than keeping K
    gathered copies of the values: O(R C) memory per factor instead of O(R K C), and no per-link autograd nodes.
    The backward is written in differentiable operations, so double backward works too::

        grad_values[j]    = sum over (i, k) with rows[k, i] = j of weights[i, k] grad[i]
        grad_weights[i, k] = grad[i] . values[rows[k, i]]
    """

    @staticmethod
    def forward(ctx, values, weights, rows):
        ctx.save_for_backward(values, weights, rows)
        return chord_mix(values, weights, rows)

    @staticmethod
    def backward(ctx, grad):
        values, weights, rows = ctx.saved_tensors
        grad_values = grad_weights = None
        if ctx.needs_input_grad[0]:
            grad_values = torch.zeros_like(values)
            for k in range(rows.shape[0]):
                grad_values.index_add_(0, rows[k], grad * weights[:, k, None])
        if ctx.needs_input_grad[1]:
            grad_weights = torch.stack(
                [torch.linalg.vecdot(grad, values.index_select(0, rows[k])) for k in range(rows.shape[0])], dim=-1
            )
        return grad_values, grad_weights, None


@register_attention("psf")
class PSFAttention(EfficientAttention):
    """Chord sparse-factorization attention; has a fixed maximum length (the Chord link count)."""

    settings_class = PSFSettings
    paper = "Zhang & Yang, Sparse factorization of square matrices with application to neural attention modeling"
    equations = "Secs. 3-4, Eqs. 1 and 3"
    complexity = "O(N log^2 N) time, O(N log N) memory"
    needs_max_length = True
    uses_query_key = False

    def __init__(self, hidden_size, num_heads, settings, **kwargs):
        super().__init__(hidden_size, num_heads, settings, **kwargs)
        default = max(1, log2_ceil(self.max_length))
        self.num_factors = settings.num_factors or default
        self.num_links = settings.num_links or default
        hidden = settings.factor_hidden_size or hidden_size
        # The M MLPs f_m, batched: C -> hidden -> GELU -> K.
        self.factor_in_weight = nn.Parameter(torch.empty(self.num_factors, hidden_size, hidden))
        self.factor_in_bias = nn.Parameter(torch.empty(self.num_factors, 1, hidden))
        self.factor_out_weight = nn.Parameter(torch.empty(self.num_factors, hidden, self.num_links))
        self.factor_out_bias = nn.Parameter(torch.empty(self.num_factors, 1, self.num_links))
        self.reset_parameters()

    def reset_parameters(self, std: float = 0.02) -> None:
        init.normal_(self.factor_in_weight, std=std)
        init.zeros_(self.factor_in_bias)
        init.normal_(self.factor_out_weight, std=std)
        init.copy_(self.factor_out_bias, F.one_hot(torch.zeros(self.num_factors, 1, dtype=torch.long),
                                                   self.num_links).float())

    def factor_weights(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """Non-zeros of every factor, ``[M, B, N, K]`` (Eq. 3)."""
        batch, length, width = hidden_states.shape
        flat = hidden_states.reshape(1, batch * length, width)
        hidden = F.gelu(torch.baddbmm(self.factor_in_bias, flat.expand(self.num_factors, -1, -1), self.factor_in_weight))
        weights = torch.baddbmm(self.factor_out_bias, hidden, self.factor_out_weight)
        return weights.view(self.num_factors, batch, length, self.num_links)

    def apply_factor(self, values: torch.Tensor, weights: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """``W_m V`` (plus ``V`` with ``residual``): ``values [B, N, C]``, ``weights [B, N, K]``, ``rows [K, B * N]``
        (see :func:`link_rows`) -> ``[B, N, C]``."""
        batch, length, width = values.shape
        flat_values = values.reshape(batch * length, width)
        mixed = ChordMix.apply(flat_values, weights.reshape(batch * length, self.num_links), rows)
        return (mixed + flat_values if self.settings.residual else mixed).view(batch, length, width)

    def dense_factor(self, weights: torch.Tensor, links: torch.Tensor) -> torch.Tensor:
        """The dense ``[B, N, N]`` matrix of one factor (for ``output_attentions`` only)."""
        batch, length, _ = weights.shape
        dense = torch.zeros(batch, length, length, dtype=weights.dtype, device=weights.device)
        dense.scatter_add_(2, links, weights)
        if self.settings.residual:
            dense = dense + torch.eye(length, dtype=weights.dtype, device=weights.device)
        return dense

    def forward(self, hidden_states, padding_mask=None, state=None, output_attentions=False) -> AttentionOutput:
        batch, length, _ = hidden_states.shape
        self.check_length(length)
        links = chord_links(padding_mask, batch, length, self.num_links, hidden_states.device)
        weights = self.factor_weights(hidden_states)
        values = self.value(hidden_states)
        with torch.autocast(hidden_states.device.type, enabled=False):
            compute_dtype = torch.promote_types(values.dtype, torch.float32)  # at least float32, float64 stays
            weights, context = weights.to(compute_dtype), values.to(compute_dtype)
            rows = link_rows(links)
            for m in reversed(range(self.num_factors)):
                context = self.apply_factor(context, weights[m], rows)
            attentions = None
            if output_attentions:
                attentions = self.dense_factor(weights[0], links)
                for m in range(1, self.num_factors):
                    attentions = attentions @ self.dense_factor(weights[m], links)
                attentions = attentions[:, None]
        return AttentionOutput(context.to(values.dtype), attentions=attentions)
