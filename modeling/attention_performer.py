"""Performer: softmax attention approximated by FAVOR+ positive orthogonal random features.

Paper: Choromanski, Likhosherstov, Dohan, Song, Gane, Sarlos, Hawkins, Davis, Mohiuddin, Kaiser, Belanger,
Colwell & Weller, "Rethinking Attention with Performers", ICLR 2021, arXiv:2009.14794, Sec. 2 (FAVOR+: Sec. 2.2
generalised attention, Sec. 2.3 positive random features, Lemma 1, Sec. 2.4 orthogonal random features).

Per head, with ``x' = x / d^(1/4)`` (so that ``exp(q' . k')`` is softmax's ``exp(q . k / sqrt(d))``) and the m
rows ``w_1 .. w_m`` of a fixed random matrix ``W [m, d]`` (Lemma 1's positive features)::

    phi(x)  = exp(W x' - |x'|^2 / 2) / sqrt(m)                          [B, h, N, m]
    out_i   = phi(q_i) (sum_j phi(k_j)^T v_j) / (phi(q_i) . sum_j phi(k_j))

with sums over real tokens only (pads are zeroed in ``phi(K)``). ``E[phi(q) . phi(k)] = exp(q' . k')``, so A is an
unbiased estimate of softmax's numerator, row-normalised: ``A_ij = phi(q_i) . phi(k_j) / sum_j phi(q_i) . phi(k_j)``.

``W``: orthogonal Gaussian rows (Sec. 2.4): groups of d rows orthogonalised by Gram-Schmidt (QR of a Gaussian matrix
with R's diagonal made positive), each row rescaled to the norm of an independent d-dimensional Gaussian vector, so
that every row is marginally N(0, I_d) (the authors' ``create_projection_matrix`` with ``scaling=0``, except that it
keeps QR's own signs, which bias the rows' directions and so the estimate). One ``W`` per layer, shared by the
heads, as in the authors' code. It is a persistent buffer drawn from ``feature_seed + layer_idx`` (so a saved model
restores it and a converted checkpoint gets the same features every time). With ``redraw_interval = n`` (default
None: never), a fresh ``W`` is drawn from torch's global generator (reproducible under ``torch.manual_seed``, like
dropout) before every n-th training step; a step is a training-mode forward with gradients on, not counting the
recomputation of gradient checkpointing. The step count is a Python attribute, which ``torch.compile`` specialises
on: with redraws on, a compiled model may recompile at every step (the default, fixed features, compiles once).

Numerical stabilisation (the paper's ``exp`` overflows or underflows easily): as in the authors' code, each query
row is divided by a per-row maximum, here its largest feature, ``exp(e_i - max_f e_if)`` with ``e`` the exponent
above (the authors take the maximum of ``W x'`` alone: any per-row constant cancels); the keys of a sequence and
head are divided by their largest feature over *real* tokens only (the authors take one maximum over the whole
batch, through which pads and the other sequences of the batch would change the result). Both factors are constant
along the normalised rows, so they cancel exactly; they are treated as constants (no gradient), which is exact for
the same reason. The authors add 1e-6 to every feature, which would break that cancellation; here no constant is
added and the normaliser is only kept from reaching zero (clamped at the dtype's smallest normal number), so the
result is exactly the paper's.

Dropout (``attention_probs_dropout_prob``; the paper names none): whole columns of the attention matrix, as for
every kernelized mechanism (:mod:`kernel_attention`).

Cost: O(N m d) time, O(N m) memory per head (m = ``num_features``, default 256).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from transformers import initialization as init

from .attention_settings import setting
from .attention_registry import register_attention, register_settings
from .kernel_attention import KernelAttention, KernelSettings
from .masking import masked_fill_min, zero_pads


@register_settings("performer")
@dataclass(frozen=True)
class PerformerSettings(KernelSettings):
    """``num_features``: m, the number of random features (default 256).
    ``redraw_interval``: draw new features every this many training steps (None: keep them fixed).
    ``feature_seed``: seed of the initial features (layer i uses ``feature_seed + i``)."""

    num_features: int = setting(256, int, minimum=1)
    redraw_interval: int | None = setting(None, int, minimum=1, none_means="fixed features")
    feature_seed: int = setting(0, int, minimum=0)


def orthogonal_gaussian_features(num_features: int, dim: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """``[m, d]`` orthogonal random features (Sec. 2.4), in float64 on the CPU: ``ceil(m / d)`` groups of d orthonormal
    rows (Gram-Schmidt of a Gaussian matrix, as the paper has it: QR with R's diagonal made positive, without which
    the rows' directions are not uniform), the first m rows kept, each scaled to the norm of a Gaussian vector."""
    groups = []
    for _ in range(math.ceil(num_features / dim)):
        gaussian = torch.randn(dim, dim, generator=generator, dtype=torch.float64, device="cpu")
        q, r = torch.linalg.qr(gaussian)
        groups.append((q * torch.sign(torch.diagonal(r))).T)  # Gram-Schmidt's signs: uniformly random directions
    norms = torch.randn(num_features, dim, generator=generator, dtype=torch.float64, device="cpu").norm(dim=1)
    return norms[:, None] * torch.cat(groups)[:num_features]


def in_backward_pass() -> bool:
    """Whether autograd's engine is running (gradient checkpointing recomputes a forward there)."""
    return torch._C._current_graph_task_id() != -1


@register_attention("performer")
class PerformerAttention(KernelAttention):
    """FAVOR+ attention; ``random_features`` ``[m, d]`` is a buffer saved with the model."""

    settings_class = PerformerSettings
    paper = "Choromanski et al., Rethinking Attention with Performers, ICLR 2021 (arXiv:2009.14794)"
    paper_url = "https://arxiv.org/abs/2009.14794"
    citation = """@inproceedings{choromanski2021rethinking,
  title = {Rethinking Attention with {Performers}},
  author = {Choromanski, Krzysztof Marcin and Likhosherstov, Valerii and Dohan, David and Song, Xingyou and
            Gane, Andreea and Sarlos, Tamas and Hawkins, Peter and Davis, Jared Quincy and Mohiuddin, Afroz and
            Kaiser, Lukasz and Belanger, David Benjamin and Colwell, Lucy J. and Weller, Adrian},
  booktitle = {International Conference on Learning Representations},
  year = {2021},
  eprint = {2009.14794},
  archivePrefix = {arXiv}
}"""
    equations = "Sec. 2, FAVOR+: Lemma 1 positive random features, Sec. 2.4 orthogonal features"
    complexity = "O(N m d) time, O(N m) memory"

    def __init__(self, hidden_size, num_heads, settings, **kwargs):
        super().__init__(hidden_size, num_heads, settings, **kwargs)
        self.register_buffer("random_features", torch.empty(settings.num_features, self.head_dim))
        self.training_steps = 0
        self.reset_parameters()

    def reset_parameters(self, std: float = 0.02) -> None:
        generator = torch.Generator().manual_seed(self.settings.feature_seed + self.layer_idx)
        init.copy_(self.random_features, orthogonal_gaussian_features(*self.random_features.shape, generator))

    def redraw_features(self) -> None:
        """Replace ``random_features`` by a fresh draw from torch's global generator."""
        with torch.no_grad():
            self.random_features.copy_(orthogonal_gaussian_features(*self.random_features.shape))

    def count_training_step(self) -> None:
        """Redraw the features before every ``redraw_interval``-th training step (see the module docstring)."""
        interval = self.settings.redraw_interval
        if not (interval and self.training and torch.is_grad_enabled()) or in_backward_pass():
            return
        if self.training_steps and self.training_steps % interval == 0:
            self.redraw_features()
        self.training_steps += 1

    def exponents(self, x: torch.Tensor) -> torch.Tensor:
        """``W x' - |x'|^2 / 2`` with ``x' = x / d^(1/4)``: ``x [B, h, N, d]`` -> ``[B, h, N, m]``."""
        scaled = x * self.head_dim**-0.25
        features = self.random_features.to(scaled.dtype)
        return torch.matmul(scaled, features.T) - scaled.square().sum(-1, keepdim=True) / 2

    def kernel_features(self, query, key, padding_mask):
        """``phi(Q)``, ``phi(K)`` (pads zeroed), each ``[B, h, N, m]`` up to a constant per query row and per
        (sequence, head) for the keys (see the module docstring)."""
        self.count_training_step()
        scale = self.settings.num_features**-0.5
        query_exponents = self.exponents(query)
        query_features = torch.exp(query_exponents - query_exponents.amax(-1, keepdim=True).detach()) * scale
        keep = None if padding_mask is None else padding_mask[:, None, :, None]
        key_exponents = masked_fill_min(self.exponents(key), keep)  # pads at the lowest value: never the max
        key_features = torch.exp(key_exponents - key_exponents.amax((2, 3), keepdim=True).detach()) * scale
        return query_features, zero_pads(key_features, padding_mask, token_dim=2)

    def normaliser(self, similarity_sums: torch.Tensor) -> torch.Tensor:
        """The sums themselves, kept from zero (no constant added: see the module docstring)."""
        return similarity_sums.clamp_min(torch.finfo(similarity_sums.dtype).tiny)
