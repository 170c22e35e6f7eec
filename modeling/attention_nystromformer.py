"""Nyströmformer: softmax attention approximated by the Nyström method on segment-mean landmarks.

Paper: Xiong et al., "Nyströmformer: A Nyström-Based Algorithm for Approximating Self-Attention",
AAAI 2021 (arXiv:2102.03902), Sec. 3: the Nyström form of the softmax matrix, landmarks as segment
means, the iterative Moore-Penrose pseudo-inverse (Lemma 1) and the convolution skip on V.

Per head, with m landmarks ``Q~, K~`` ``[B, h, m, d]`` (means of m segments of the queries and keys)::

    F   = softmax(Q  K~^T / sqrt(d))                       [B, h, N, m]   (kernel 1)
    A_S = softmax(Q~ K~^T / sqrt(d))                       [B, h, m, m]   (kernel 2)
    B   = softmax(Q~ K^T  / sqrt(d))   (pads excluded)     [B, h, m, N]   (kernel 3)
    out = F Z (B V)  +  conv(V)                            [B, h, N, d]

``Z`` approximates the pseudo-inverse ``A_S^+`` by ``pinv_iterations`` steps of Lemma 1's iteration::

    Z_0     = A_S^T / (||A_S||_1 ||A_S||_inf)               (max column sum times max row sum, per matrix)
    Z_{j+1} = Z_j (13 I - A_S Z_j (15 I - A_S Z_j (7 I - A_S Z_j))) / 4

``conv`` (``conv_kernel_size`` k, None for none) is the paper's skip connection: a convolution of V over
the tokens, one k-tap kernel per head shared by its channels (``nn.Conv2d`` with ``groups=h`` and a
``(k, 1)`` kernel, as the authors' code and Transformers' ``NystromformerSelfAttention``), zero-padded at
the sequence ends. The attention matrix this implies is ``F Z B + T``, T the banded matrix of the
convolution.

Choices (also on docs/baselines.md):

* Landmarks are segment means over *real* tokens only (Transformers' version averages pads into them).
  A sequence of real length L splits into m segments by rank among its real tokens: token of rank t goes
  to segment ``floor(t m / L)``, so segments are contiguous and their sizes differ by at most one (exactly
  L / m when m divides L, the paper's split). When L < m, L segments hold one token each and the others
  are empty; an empty segment gives no landmark: it is masked out of F and A_S (its row and column of A_S
  are zero, which the iteration keeps zero, so Z is the pseudo-inverse iteration on the real landmarks
  alone). Everything depends only on each sequence's real tokens, so padding (right, left or holes)
  changes nothing.
* For L <= m every token is its own landmark, so F = A_S = B = softmax(Q K^T / sqrt(d)) and the output
  is ``A Z A V``, softmax attention up to the pseudo-inverse's convergence (Transformers switches to
  exact softmax attention when its fixed length equals m; a switch on the real length would be a
  data-dependent branch).
* ``Z_0`` is the paper's, per matrix; Transformers' default ("original") divides by the largest column
  sum over the whole batch and all heads, which would make one sequence's output depend on the others.
* The pseudo-inverse iteration runs in float32 (float64 stays float64) even under autocast, a
  precaution at the cost of m x m products: each step chains four products and rounding compounds over
  the steps (on the tests' random inputs bfloat16 adds little error, but A_S may be ill-conditioned).
* The convolution runs over the values in rank order (pads removed, zeros beyond the real length), so
  left padding and holes see the same zero boundary as an unpadded sequence.

Unpadded, with N divisible by m and N > m, the output equals Transformers' ``NystromformerSelfAttention``
given the same weights (its ``conv`` has the same name and shape), when Transformers uses the per-matrix
``Z_0`` (its "exact" coefficient; the same as its default for one sequence and one head).

Dropout (``attention_probs_dropout_prob``; the paper names none, so the standard place): on the entries of
the softmax over the tokens, kernel B.

Defaults: ``num_landmarks`` 64 and ``pinv_iterations`` 6 (the paper's settings), ``conv_kernel_size`` 33 (ours;
Transformers' config defaults to 65).

Cost: O(N m d + m^3 + N k d) time, O(N m) memory per head.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from .attention_base import AttentionOutput, EfficientAttention
from .attention_settings import AttentionSettings, require, setting
from .attention_registry import register_attention, register_settings
from .masking import gather_tokens, masked_softmax, real_lengths, real_positions, token_ranks


@register_settings("nystromformer")
@dataclass(frozen=True)
class NystromformerSettings(AttentionSettings):
    """``num_landmarks``: m, the number of segment-mean landmarks. ``pinv_iterations``: steps of the iterative
    pseudo-inverse. ``conv_kernel_size``: taps of the depthwise convolution skip on V (odd), None for none."""

    num_landmarks: int = setting(64, int, minimum=1)
    pinv_iterations: int = setting(6, int, minimum=1)
    conv_kernel_size: int | None = setting(33, int, minimum=1, none_means="no convolution skip")

    def check(self, hidden_size, num_heads, max_length):
        kernel = self.conv_kernel_size
        require(kernel is None or kernel % 2 == 1, "conv_kernel_size", kernel,
                "an odd positive integer (the output keeps the input's length), or None for no convolution")

def landmark_weights(padding_mask: torch.Tensor | None, batch: int, length: int, num_landmarks: int, device,
                     dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """Segment-mean weights ``[B, m, N]`` (row s averages the real tokens of segment s: rank t goes to segment
    ``floor(t m / L)``) and which landmarks are real ``[B, m]`` (their segment is not empty)."""
    ranks = token_ranks(padding_mask, batch, length, device)
    lengths = real_lengths(padding_mask, batch, length, device).clamp(min=1)[:, None]
    segments = ranks * num_landmarks // lengths  # [B, N]
    members = segments[:, None, :] == torch.arange(num_landmarks, device=device)[None, :, None]  # [B, m, N]
    if padding_mask is not None:
        members = members & padding_mask[:, None, :]
    counts = members.sum(-1)  # [B, m]
    return members.to(dtype) / counts.clamp(min=1)[..., None].to(dtype), counts > 0


def iterative_pinv(matrix: torch.Tensor, iterations: int) -> torch.Tensor:
    """Lemma 1's approximation of the pseudo-inverse of each ``matrix [..., m, m]``, from the paper's
    ``Z_0 = A^T / (||A||_1 ||A||_inf)`` (an all-zero matrix gives zero)."""
    identity = torch.eye(matrix.shape[-1], dtype=matrix.dtype, device=matrix.device)
    norms = matrix.abs().sum(-2).amax(-1) * matrix.abs().sum(-1).amax(-1)  # max column sum * max row sum
    z = matrix.transpose(-1, -2) / norms.clamp(min=torch.finfo(matrix.dtype).tiny)[..., None, None]
    for _ in range(iterations):
        az = matrix @ z
        z = 0.25 * z @ (13 * identity - az @ (15 * identity - az @ (7 * identity - az)))
    return z


@register_attention("nystromformer")
class NystromformerAttention(EfficientAttention):
    """Nyström approximation of softmax attention with segment-mean landmarks and a convolution skip on V."""

    settings_class = NystromformerSettings
    paper = "Xiong et al., Nyströmformer: A Nyström-Based Algorithm for Approximating Self-Attention, AAAI 2021"
    paper_url = "https://arxiv.org/abs/2102.03902"
    citation = """@inproceedings{xiong2021nystromformer,
  title = {Nystr{\\"o}mformer: A Nystr{\\"o}m-Based Algorithm for Approximating Self-Attention},
  author = {Xiong, Yunyang and Zeng, Zhanpeng and Chakraborty, Rudrasis and Tan, Mingxing and Fung, Glenn and
            Li, Yin and Singh, Vikas},
  booktitle = {Proceedings of the AAAI Conference on Artificial Intelligence},
  year = {2021},
  eprint = {2102.03902},
  archivePrefix = {arXiv}
}"""
    equations = "Sec. 3: Nyström form F A_S^+ B, segment-mean landmarks, iterative pseudo-inverse (Lemma 1)"
    complexity = "O(N m d + m^3) time, O(N m) memory"

    def __init__(self, hidden_size, num_heads, settings, **kwargs):
        super().__init__(hidden_size, num_heads, settings, **kwargs)
        kernel = settings.conv_kernel_size
        if kernel is not None:
            self.conv = nn.Conv2d(num_heads, num_heads, kernel_size=(kernel, 1), padding=(kernel // 2, 0),
                                  bias=False, groups=num_heads)

    def kernels(self, query, key, padding_mask):
        """F ``[B, h, N, m]``, A_S ``[B, h, m, m]`` (zero rows and columns at empty landmarks), B ``[B, h, m, N]``."""
        batch, _, length, _ = query.shape
        weights, real = landmark_weights(padding_mask, batch, length, self.settings.num_landmarks, query.device,
                                         query.dtype)
        query_landmarks, key_landmarks = weights[:, None] @ query, weights[:, None] @ key  # [B, h, m, d]
        scale, real_columns = self.head_dim**-0.5, real[:, None, None, :]
        token_columns = None if padding_mask is None else padding_mask[:, None, None, :]
        kernel_1 = masked_softmax(query @ key_landmarks.transpose(-1, -2) * scale, real_columns, dim=-1)
        kernel_2 = masked_softmax(query_landmarks @ key_landmarks.transpose(-1, -2) * scale, real_columns, dim=-1)
        kernel_2 = kernel_2 * real[:, None, :, None].to(kernel_2.dtype)
        kernel_3 = masked_softmax(query_landmarks @ key.transpose(-1, -2) * scale, token_columns, dim=-1)
        return kernel_1, kernel_2, kernel_3

    def pseudo_inverse(self, kernel_2: torch.Tensor) -> torch.Tensor:
        """Z ``[B, h, m, m]``, computed in at least float32 with autocast off, returned in ``kernel_2``'s dtype."""
        with torch.autocast(kernel_2.device.type, enabled=False):
            compute_dtype = torch.promote_types(kernel_2.dtype, torch.float32)
            return iterative_pinv(kernel_2.to(compute_dtype), self.settings.pinv_iterations).to(kernel_2.dtype)

    def convolution_skip(self, value: torch.Tensor, padding_mask: torch.Tensor | None) -> torch.Tensor:
        """``conv(V)`` ``[B, h, N, d]`` over each sequence's real tokens in rank order, zero beyond its ends."""
        if padding_mask is None:
            return self.conv(value)
        batch, _, length, _ = value.shape
        ranked = gather_tokens(value, real_positions(padding_mask, batch, length, value.device))
        inside = torch.arange(length, device=value.device) < padding_mask.sum(-1, keepdim=True)  # [B, N]
        mixed = self.conv(ranked * inside[:, None, :, None].to(value.dtype))
        return gather_tokens(mixed, token_ranks(padding_mask, batch, length, value.device))

    def convolution_matrix(self, padding_mask: torch.Tensor | None, batch: int, length: int) -> torch.Tensor:
        """The dense ``[B, h, N, N]`` matrix T of the convolution skip (for ``output_attentions`` only): entry
        ``(i, j)`` is tap ``rank_j - rank_i + k // 2`` of the head's kernel, zero outside the kernel and at pads."""
        taps = self.conv.weight[:, 0, :, 0]  # [h, k]
        kernel = taps.shape[1]
        ranks = token_ranks(padding_mask, batch, length, taps.device)
        offsets = ranks[:, None, :] - ranks[:, :, None] + kernel // 2  # [B, N, N]
        inside = (offsets >= 0) & (offsets < kernel)
        if padding_mask is not None:
            inside = inside & padding_mask[:, None, :] & padding_mask[:, :, None]
        matrix = taps[:, offsets.clamp(0, kernel - 1)] * inside.to(taps.dtype)  # [h, B, N, N]
        return matrix.transpose(0, 1)

    def attend(self, hidden_states, padding_mask=None, state=None, output_attentions=False,
               projections=None) -> AttentionOutput:
        query, key, value = projections or self.project(hidden_states)
        kernel_1, kernel_2, kernel_3 = self.kernels(query, key, padding_mask)
        core = self.pseudo_inverse(kernel_2)
        context = (kernel_1 @ core) @ (self.dropout(kernel_3) @ value)
        if self.settings.conv_kernel_size is not None:
            context = context + self.convolution_skip(value, padding_mask)
        attentions = None
        if output_attentions:
            attentions = kernel_1 @ core @ kernel_3
            if self.settings.conv_kernel_size is not None:
                attentions = attentions + self.convolution_matrix(padding_mask, *hidden_states.shape[:2])
        return AttentionOutput(self.merge_heads(context), attentions=attentions)
