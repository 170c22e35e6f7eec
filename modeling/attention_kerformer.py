"""Kerformer: kernel attention with sigmoid queries, softmax keys and SE-K reweighting of the keys.

Paper, link, equations and citation: ``KerformerAttention.paper``, ``.paper_url``, ``.equations``, ``.citation``
(SE-K: Sec. 3.5, Fig. 4). The op and its naive O(N^2) form: ``ops_kerformer.py`` (``kerformer_attention``,
``naive_kerformer_attention``); the layer gives the op's features (``kerformer_features``) to the forward every
kernelized mechanism shares (``KernelAttention.attend``), which is what ``kerformer_attention`` computes.

Per head, with ``phi = sigmoid`` applied elementwise (Eq. 7) and ``varphi = softmax`` over the head
width for each token (Eq. 8, "row by row")::

    K' = SE-K(varphi(K))                                              [B, h, N, d]
    out_i = phi(q_i) (sum_j K'_j^T v_j) / (phi(q_i) . sum_j K'_j + eps)   (Eq. 9)

with sums over real tokens only (pads are zeroed in K'), computed right to left so that only
``d x d`` summaries are built.

SE-K (``se_mode``):

* ``"token"`` (default, the paper's locality-enhancing reweighting, Fig. 5): the masked mean of
  ``varphi(K)`` over N gives a d-vector per head; two linear layers ``d -> d / se_reduction -> N_max``
  with no ReLU between them (the paper removes it) and a sigmoid give one weight per position;
  token j's key row is multiplied by the weight at its position, counted among real tokens so that
  left padding is invariant. ``N_max`` is the model's maximum length, so longer inputs are an error
  (extending it: :meth:`KerformerAttention.extend_length_sized_weights`).
* ``"channel"`` (our length-agnostic addition): the same pooled vector, ``d -> d / se_reduction -> d``,
  sigmoid, scaling the key channels.
* ``"none"``: the paper's ablation "Sigmoid(Q) + Softmax(K)" (Table 6).

The SE-K layers are shared by the heads. The attention matrix this implies is
``A_ij = phi(q_i) . K'_j / (phi(q_i) . sum_j K'_j + eps)``.

Dropout (``attention_probs_dropout_prob``; the paper names none): whole columns of the attention matrix, as
for every kernelized mechanism (:mod:`kernel_attention`).

Cost: O(N d^2) time, O(N d) memory per head.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from .attention_settings import require, setting
from .attention_registry import register_attention, register_settings
from .kernel_attention import KernelAttention, KernelSettings
from .ops_kerformer import kerformer_features
from .position_extension import replace_parameter, tile_to_length

SE_MODES = ("token", "channel", "none")


@register_settings("kerformer")
@dataclass(frozen=True)
class KerformerSettings(KernelSettings):
    """SE-K's ``se_mode`` and ``se_reduction`` (Sec. 3.5), Eq. 9's ``eps``."""

    se_mode: str = setting("token", str, choices=SE_MODES)
    se_reduction: int = setting(4, int, minimum=1)
    eps: float = setting(1e-6, float, above=0)

    def check(self, hidden_size, num_heads, max_length):
        head_dim = hidden_size // num_heads
        require(self.se_reduction <= head_dim, "se_reduction", self.se_reduction,
                f"an integer in [1, head width = {head_dim}]")
        require(self.se_mode != "token" or bool(max_length), "se_mode", self.se_mode,
                "'channel' or 'none' without a maximum length ('token' sizes weights by it)")


@register_attention("kerformer")
class KerformerAttention(KernelAttention):
    """Sigmoid/softmax kernel attention with SE-K reweighting of the keys (Eqs. 7-9, Sec. 3.5)."""

    settings_class = KerformerSettings
    paper = ("Gan et al., A novel approach to attention mechanism using kernel functions: Kerformer, "
             "Frontiers in Neurorobotics 2023")
    paper_url = "https://doi.org/10.3389/fnbot.2023.1214203"
    equations = "Secs. 3.2-3.3, Eqs. 4-9; SE-K Sec. 3.5"
    citation = """@article{gan2023kerformer,
  title = {A novel approach to attention mechanism using kernel functions: {Kerformer}},
  author = {Gan, Yao and Fu, Yanyun and Wang, Deyong and Li, Yongming},
  journal = {Frontiers in Neurorobotics},
  volume = {17},
  pages = {1214203},
  year = {2023},
  doi = {10.3389/fnbot.2023.1214203}
}"""
    complexity = "O(N d^2) time, O(N d) memory"
    needs_max_length = True
    length_limit_fix = ', or use se_mode="channel", which has no length limit'

    def __init__(self, hidden_size, num_heads, settings, **kwargs):
        self.needs_max_length = settings.se_mode == "token"  # only token mode sizes weights by N_max
        super().__init__(hidden_size, num_heads, settings, **kwargs)
        if settings.se_mode != "none":
            squeezed = max(1, self.head_dim // settings.se_reduction)
            outputs = self.max_length if settings.se_mode == "token" else self.head_dim
            self.se_reduce = nn.Linear(self.head_dim, squeezed)
            self.se_expand = nn.Linear(squeezed, outputs)

    def extend_length_sized_weights(self, max_length: int) -> None:
        """Token-mode SE-K's second layer (one output per token rank: weight ``[N_max, d / r]``, bias
        ``[N_max]``) grows to ``max_length`` outputs by repeating its rows cyclically, as the position rows are
        (:func:`~position_extension.tile_to_length`): rank ``t`` gets the old rank ``t mod N_max``'s weights.

        Exact: on inputs of up to the old ``N_max`` real tokens the output is unchanged (the rows of their ranks
        are kept). Not exact: longer inputs have no old output to match; their keys are reweighted with the
        pattern of the first ``N_max`` ranks, repeated, from a pooled key that now averages more tokens."""
        for name in ("weight", "bias"):
            replace_parameter(self.se_expand, name, tile_to_length(getattr(self.se_expand, name), max_length))
        self.se_expand.out_features = max_length

    def se_weights(self):
        """SE-K's ``(W_1, b_1, W_2, b_2)``, or None."""
        if self.settings.se_mode == "none":
            return None
        return self.se_reduce.weight, self.se_reduce.bias, self.se_expand.weight, self.se_expand.bias

    def kernel_features(self, query, key, padding_mask):
        """``phi(Q)``, SE-K's ``varphi(K)`` ``[B, h, N, d]`` (Eqs. 7-8)."""
        return kerformer_features(query, key, padding_mask, self.settings.se_mode, self.se_weights())
