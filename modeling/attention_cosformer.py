"""cosFormer: ReLU features with a cos-based re-weighting of the attention by relative position.

Paper: Qin, Sun, Deng, Li, Wei, Lv, Yan, Kong & Zhong, "cosFormer: Rethinking Softmax in Attention", ICLR 2022,
arXiv:2202.08791, Sec. 3 (linear attention with ReLU features; the cos-based re-weighting and its decomposition).

Per head, with token i's rank among its sequence's real tokens counted from 1, ``M = L`` the sequence's real
length (the paper sets M to the sequence length) and ``theta_i = pi/2 * i / M``::

    s(q_i, k_j) = relu(q_i) . relu(k_j) cos(pi/2 * (i - j) / M)
                = [relu(q_i) cos theta_i] . [relu(k_j) cos theta_j] + [relu(q_i) sin theta_i] . [relu(k_j) sin theta_j]

so the re-weighted similarity is a plain kernel with features of width 2d, ``phi(x_i) = [relu(x_i) sin theta_i,
relu(x_i) cos theta_i]`` (the authors' code's order), and the attention stays linear::

    out_i = phi(q_i) (sum_j phi(k_j)^T v_j) / max(phi(q_i) . sum_j phi(k_j), eps)

with sums over real tokens only (pads are zeroed in ``phi(K)``). Since ``|i - j| < M`` every weight
``cos(pi/2 * (i - j) / M)`` is positive: nearby tokens weigh more (the paper's locality bias). The attention
matrix this implies is ``A_ij = s(q_i, k_j) / max(sum_j s(q_i, k_j), eps)``.

Choices: ranks and M are counted among real tokens, so right or left padding changes nothing (the authors' code
takes M as the padded length); the normaliser is clamped below at ``eps`` (default 1e-6), as in the authors' code
(a query whose ReLU features are all zero gets a zero output).

Dropout (``attention_probs_dropout_prob``; the paper names none): whole columns of the attention matrix, as for
every kernelized mechanism (:mod:`kernel_attention`).

Cost: O(N d^2) time, O(N d) memory per head (twice linear attention's feature width).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .attention_settings import setting
from .attention_registry import register_attention, register_settings
from .kernel_attention import KernelAttention, KernelSettings
from .masking import real_lengths, token_ranks, zero_pads


@register_settings("cosformer")
@dataclass(frozen=True)
class CosformerSettings(KernelSettings):
    """``eps``: lower bound of the normaliser (the authors' code: 1e-6)."""

    eps: float = setting(1e-6, float, above=0)


def position_angles(padding_mask: torch.Tensor | None, batch: int, length: int, dtype, device) -> torch.Tensor:
    """``[B, 1, N, 1]`` angle ``theta_i = pi/2 * i / M`` of each token, i its rank among real tokens counted from 1,
    M its sequence's real length."""
    ranks = token_ranks(padding_mask, batch, length, device) + 1
    lengths = real_lengths(padding_mask, batch, length, device).clamp(min=1)[:, None]
    return (math.pi / 2 * ranks.to(dtype) / lengths.to(dtype))[:, None, :, None]


def cos_reweighted(x: torch.Tensor, angles: torch.Tensor) -> torch.Tensor:
    """``[relu(x) sin theta, relu(x) cos theta]``: ``x [B, h, N, d]``, ``angles [B, 1, N, 1]`` -> ``[B, h, N, 2d]``."""
    features = torch.relu(x)
    return torch.cat([features * torch.sin(angles).to(x.dtype), features * torch.cos(angles).to(x.dtype)], dim=-1)


@register_attention("cosformer")
class CosformerAttention(KernelAttention):
    """Linear attention with ReLU features and cos-based re-weighting by relative position among real tokens."""

    settings_class = CosformerSettings
    paper = "Qin et al., cosFormer: Rethinking Softmax in Attention, ICLR 2022 (arXiv:2202.08791)"
    paper_url = "https://arxiv.org/abs/2202.08791"
    citation = """@inproceedings{qin2022cosformer,
  title = {{cosFormer}: Rethinking Softmax in Attention},
  author = {Qin, Zhen and Sun, Weixuan and Deng, Hui and Li, Dongxu and Wei, Yunshen and Lv, Baohong and
            Yan, Junjie and Kong, Lingpeng and Zhong, Yiran},
  booktitle = {International Conference on Learning Representations},
  year = {2022},
  eprint = {2202.08791},
  archivePrefix = {arXiv}
}"""
    equations = "Sec. 3, ReLU features and cos-based re-weighting"
    complexity = "O(N d^2) time, O(N d) memory"

    def kernel_features(self, query, key, padding_mask):
        """``phi(Q)``, ``phi(K)`` (pads zeroed), each ``[B, h, N, 2d]``."""
        batch, _, length, _ = query.shape
        angle_dtype = torch.promote_types(query.dtype, torch.float32)  # half precision cannot tell i / M apart
        angles = position_angles(padding_mask, batch, length, angle_dtype, query.device)
        return cos_reweighted(query, angles), zero_pads(cos_reweighted(key, angles), padding_mask, token_dim=2)

    def normaliser(self, similarity_sums: torch.Tensor) -> torch.Tensor:
        """``max(phi(q_i) . sum_j phi(k_j), eps)``, as the authors' code clamps it."""
        return similarity_sums.clamp_min(self.settings.eps)
