"""Linear attention: softmax replaced by the feature map ``elu(x) + 1`` on queries and keys.

Paper: Katharopoulos, Vyas, Pappas & Fleuret, "Transformers are RNNs: Fast Autoregressive Transformers with
Linear Attention", ICML 2020, arXiv:2006.16236, Sec. 3.2 (Eqs. 4-6) and Sec. 3.2.1 (the feature map, Eq. 7).

Per head, with ``phi(x) = elu(x) + 1`` elementwise (Eq. 7; positive, so every similarity is positive), Eq. 5
computed right to left (Eq. 6)::

    S     = sum_j phi(k_j)^T v_j                          [B, h, d, d]    (sums over real tokens only)
    z     = sum_j phi(k_j)                                [B, h, d]
    out_i = phi(q_i) S / (phi(q_i) . z + eps)             [B, h, N, d]

The attention matrix this implies is ``A_ij = phi(q_i) . phi(k_j) / (sum_j phi(q_i) . phi(k_j) + eps)``.
Pads are zeroed in ``phi(K)``, so they enter neither S nor z. This is the paper's non-causal (encoder) form;
``eps`` (default 1e-6) is the authors' code's (fast-transformers ``LinearAttention``), added to the normaliser.
The paper uses no scaling of queries or keys, so none is applied.

Dropout (``attention_probs_dropout_prob``; the paper names none): whole columns of the attention matrix, as for
every kernelized mechanism (:mod:`kernel_attention`).

Cost: O(N d^2) time, O(N d) memory per head.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .attention_settings import setting
from .attention_registry import register_attention, register_settings
from .kernel_attention import KernelAttention, KernelSettings
from .masking import zero_pads


@register_settings("linear")
@dataclass(frozen=True)
class LinearSettings(KernelSettings):
    """``eps``: added to the normaliser of Eq. 5 (the authors' code: 1e-6)."""

    eps: float = setting(1e-6, float, above=0)


def elu_feature_map(x: torch.Tensor) -> torch.Tensor:
    """``phi(x) = elu(x) + 1`` (Eq. 7), elementwise, > 0, written out as ``x + 1`` for ``x > 0`` and ``exp(x)``
    otherwise: the same function (the exponent is clamped at 0 so that the unused branch never overflows), and
    unlike ``F.elu`` its backward compiles (``torch.compile``'s AOT backward of ``elu`` gets a gradient whose strides
    a later ``view`` rejects, seen with torch 2.13)."""
    return torch.where(x > 0, x + 1, torch.exp(x.clamp(max=0)))


@register_attention("linear")
class LinearAttention(KernelAttention):
    """Linear (kernel) attention with the ``elu + 1`` feature map."""

    settings_class = LinearSettings
    paper = "Katharopoulos et al., Transformers are RNNs, ICML 2020 (arXiv:2006.16236)"
    paper_url = "https://arxiv.org/abs/2006.16236"
    citation = """@inproceedings{katharopoulos2020transformers,
  title = {Transformers are {RNNs}: Fast Autoregressive Transformers with Linear Attention},
  author = {Katharopoulos, Angelos and Vyas, Apoorv and Pappas, Nikolaos and Fleuret, Fran{\\c{c}}ois},
  booktitle = {Proceedings of the 37th International Conference on Machine Learning},
  year = {2020},
  eprint = {2006.16236},
  archivePrefix = {arXiv}
}"""
    equations = "Sec. 3.2, Eqs. 4-7 (non-causal)"
    complexity = "O(N d^2) time, O(N d) memory"

    def kernel_features(self, query, key, padding_mask):
        """``phi(Q)`` and ``phi(K)`` (pads zeroed), each ``[B, h, N, d]``."""
        return elu_feature_map(query), zero_pads(elu_feature_map(key), padding_mask, token_dim=2)
