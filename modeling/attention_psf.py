"""PSF-Attn: a product of parametric sparse factors on Chord links replaces the attention matrix.

Paper, equations and citation: ``PSFAttention.paper``, ``.equations``, ``.citation``. The op and its naive O(N^2)
form: ``ops_psf.py`` (``psf_attention``, ``naive_psf_attention``).

Chord links (Eq. 1): in a sequence of real length L, token t links to itself and to
``(t + 2^k) mod L`` for ``k = 0 .. K-2``: K links per row. Each of the M factors ``W_m`` has its
non-zeros on those links, produced per token by its own MLP ``f_m`` from the layer input X (Eq. 3)::

    V_0 = g(X)                                              [B, N, C]   (g: the value projection)
    w_m = f_m(X) = Linear(GELU(Linear(X)))                  [B, N, K]
    (W_m V)_t = sum_k w_m[t, k] V[link(t, k)]               a gather, O(N K C)
    out = W_1 (W_2 (... (W_M V_0)))                         (optionally W_m V + V at each step)

The attention matrix this implies is the dense product ``W_1 W_2 ... W_M`` (one head).

Choices (also on docs/mechanisms/psf.md): links are taken modulo each sequence's real length and counted among
its real tokens, so pads are never reached and left or right padding gives the same result;
``K = M = ceil(log2 N_max)`` by default (``N_max`` the model's maximum length); no softmax and no
scaling, as in the paper, so the factor products run in float32 even under autocast (a product of
many unnormalised factors can overflow in float16; the Triton kernels below keep bfloat16 values, which have
float32's range, in bfloat16, each factor's sums in float32). Query and key projections are not used.
Each factor is applied by one of two exact products with hand-written backwards (``chord_mixes.py``), chosen by
what the caller passes, never by the mask's values (so the forward has no data-dependent branch, and exports to ONNX
and compiles as one graph): ``ChordShiftMix`` when no padding mask is given (each link a cyclic shift of the
sequence) and ``ChordLinkMix`` when one is, padded or not (values in rank order, repeated cyclically over each
sequence's real length, so that every link is a slice). With the fast paths on (``fast_paths.py``), each factor is
instead one Triton kernel on CUDA, gathering every token's K links into registers (``chord_kernels.py``: one pass a
factor, not 3K), and on a CPU the second product written in plain operations and compiled by ``torch.compile`` (one
fused C++ loop a factor, forward and backward); both give the same numbers to float32 rounding (on bfloat16
values the kernels round each factor's result to bfloat16).
Dropout (``attention_probs_dropout_prob``; the paper names none, so the standard place: the attention weights,
here the non-zeros ``w_m`` of every factor): in training each entry of each factor is dropped independently
and the kept ones scaled by ``1 / (1 - p)``.
Initialisation: every factor starts as the average of its K links (weight 1/K each, plus small noise
from the MLP), the starting point the paper gives its non-parametric factors (Sec. 5.1, entries drawn
from ``[1/K, 1/K + 0.01]``). Each factor is then row-stochastic, so a deep product neither vanishes nor
explodes, and every token starts out mixing the tokens its paths of M links reach. (An identity start
leaves a saddle: no path between two tokens carries weight, and the adding problem stays at chance.)
Extended to a larger ``N_max`` (positions extended at loading), the default K and M grow with it: see
:meth:`PSFAttention.extend_length_sized_weights`.
``factor_hidden_size`` is not in the paper; its default, 64, keeps the M MLPs (run on every token)
about as cheap as the value projection at RoBERTa's widths (``64 M`` is close to C).

Cost: O(N log^2 N) time, O(N log N) memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import torch
import torch.nn.functional as F
from torch import nn
from transformers import initialization as init

from .attention_base import AttentionOutput, EfficientAttention, log2_ceil
from .attention_settings import AttentionSettings, require, setting
from .attention_registry import register_attention, register_settings
from .chord_mixes import plain_chord_mix
from .fast_paths import compiled, run_fast, takes_fast_path
from .ops_psf import chord_factor_weights, chord_links, cyclic_factor, in_rank_order, psf_attention, sequence_lengths
from .ops_psf import chord_offsets  # noqa: F401 - read from here by the tests, benchmarks and docs of the Chord links
from .position_extension import replace_parameter, tile_to_length


@register_settings("psf")
@dataclass(frozen=True)
class PSFSettings(AttentionSettings):
    """``num_factors``: M (None: ceil(log2 N_max)). ``num_links``: K, links per row including the
    self link (None: ceil(log2 N_max)). ``factor_hidden_size``: hidden width of each f_m (None: the
    model width). ``residual``: ``V <- W_m V + V`` at each factor."""

    num_factors: int | None = setting(None, int, minimum=1, none_means="ceil(log2 N_max)")
    num_links: int | None = setting(None, int, minimum=1, none_means="ceil(log2 N_max)")
    factor_hidden_size: int | None = setting(64, int, minimum=1, none_means="the model width")
    residual: bool = setting(False, bool)

    def check(self, hidden_size, num_heads, max_length):
        if self.num_links is not None and max_length:
            require(2 ** (self.num_links - 2) < max_length, "num_links", self.num_links,
                    f"at most {log2_ceil(max_length) + 1} for max_length={max_length} (longest link 2^(K-2) < N_max)")


@register_attention("psf")
class PSFAttention(EfficientAttention):
    """Chord sparse-factorization attention; has a fixed maximum length (the Chord link count)."""

    settings_class = PSFSettings
    paper = ("Khalitov et al., Sparse factorization of square matrices with application to neural attention modeling, "
             "Neural Networks 2022")
    paper_url = "https://doi.org/10.1016/j.neunet.2022.04.014"
    citation = """@article{khalitov2022sparse,
  title = {Sparse factorization of square matrices with application to neural attention modeling},
  author = {Khalitov, Ruslan and Yu, Tong and Cheng, Lei and Yang, Zhirong},
  journal = {Neural Networks},
  volume = {152},
  pages = {160--168},
  year = {2022},
  doi = {10.1016/j.neunet.2022.04.014}
}"""
    equations = "Secs. 3-4, Eqs. 1 and 3"
    complexity = "O(N log^2 N) time, O(N log N) memory"
    needs_max_length = True
    uses_query_key = False
    has_own_kernels = True
    fast_mixes = {"cuda": "mix_with_kernels", "cpu": "mix_compiled"}  # device type -> method

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
        init.constant_(self.factor_out_bias, 1.0 / self.num_links)

    def extend_length_sized_weights(self, max_length: int) -> None:
        """K and M, where left to their default ``ceil(log2 N_max)``, grow with ``max_length``: each factor's new
        links get weight zero (zero output column and bias), and each new factor is the identity (output layer
        zero, bias one on the self link; zero with ``residual``, where ``W V + V`` is then ``V``), applied first;
        new factor ``m`` copies the hidden layer of factor ``m mod M``, so that its output layer has live inputs to
        learn from.

        Exact: on every input, of any length, the output is unchanged (new links and factors add nothing). So an
        input longer than the old ``N_max`` reaches only the old K links' span until the new links and factors
        are trained."""
        default = max(1, log2_ceil(max_length))
        factors, links = self.settings.num_factors or default, self.settings.num_links or default
        new_factors, new_links = factors - self.num_factors, links - self.num_links
        out_weight, out_bias = (F.pad(p, (0, new_links)) for p in (self.factor_out_weight, self.factor_out_bias))
        identity = torch.zeros_like(out_bias[:1])  # [1, 1, K]: the new factors' bias
        identity[..., 0] = 0.0 if self.settings.residual else 1.0
        replace_parameter(self, "factor_out_weight", F.pad(out_weight, (0, 0, 0, 0, 0, new_factors)))
        replace_parameter(self, "factor_out_bias", torch.cat([out_bias, identity.expand(new_factors, -1, -1)]))
        for name in ("factor_in_weight", "factor_in_bias"):
            replace_parameter(self, name, tile_to_length(getattr(self, name), factors))
        self.num_factors, self.num_links = factors, links

    def factor_weights(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """Non-zeros of every factor, ``[M, B, N, K]`` (Eq. 3: ``ops_psf.chord_factor_weights``)."""
        return chord_factor_weights(hidden_states, self.factor_in_weight, self.factor_in_bias, self.factor_out_weight,
                                    self.factor_out_bias)

    def mix(self, values: torch.Tensor, weights: torch.Tensor, padding_mask: torch.Tensor | None) -> torch.Tensor:
        """``W_1 (W_2 (... (W_M V)))`` (each ``W_m V + V`` with ``residual``): ``values [B, N, C]`` (any float
        dtype), ``weights [M, B, N, K]`` (float32 or float64) -> ``[B, N, C]``, by :meth:`fast_mix` where it runs,
        else :meth:`exact_mix`. Computed in the weights' dtype, except that the kernels keep bfloat16 values in
        bfloat16."""
        fast = self.fast_mix(values, weights, padding_mask)
        return fast if fast is not None else self.exact_mix(values, weights, padding_mask)

    def fast_mix(self, values: torch.Tensor, weights: torch.Tensor,
                 padding_mask: torch.Tensor | None) -> torch.Tensor | None:
        """:meth:`mix` on its fast path where ``fast_paths.py``'s mode lets it run: the method ``fast_mixes`` names for
        the device, the Triton kernels on CUDA, each factor compiled on a CPU; None elsewhere. The package's only: a
        Hub folder's code runs the exact path."""
        name = "the 'psf' attention's factor product"
        if not takes_fast_path(name, values, devices=tuple(self.fast_mixes), own_kernels=self.has_own_kernels):
            return None
        fast_mix = getattr(type(self), self.fast_mixes[values.device.type])
        return run_fast(name, type(self).exact_mix, self, values, weights, padding_mask, kernels=fast_mix)

    def exact_mix(self, values: torch.Tensor, weights: torch.Tensor, padding_mask: torch.Tensor | None) -> torch.Tensor:
        """:meth:`mix` in PyTorch operations: the op, ``ops_psf.psf_attention``."""
        return psf_attention(values, weights, padding_mask, self.settings.residual)

    def mix_with_kernels(self, values: torch.Tensor, weights: torch.Tensor,
                         padding_mask: torch.Tensor | None) -> torch.Tensor:
        """:meth:`mix` with each factor one Triton kernel (``chord_kernels.py``), in rank order where masked; bfloat16
        values stay in bfloat16 (each factor's sums in float32), the others are computed in the weights' dtype."""
        from .chord_kernels import chord_mix

        values = values if values.dtype == torch.bfloat16 else values.to(weights.dtype)
        factor = partial(chord_mix, lengths=sequence_lengths(values, padding_mask), pads=padding_mask is not None)
        return self.in_rank_order(values, weights, padding_mask, factor)

    def mix_compiled(self, values: torch.Tensor, weights: torch.Tensor, padding_mask: torch.Tensor | None):
        """:meth:`mix` with each factor :func:`plain_chord_mix` compiled (``fast_paths.compiled``: on a CPU,
        inductor writes the K links' multiply-adds and their backward as one C++ loop each), in rank order."""
        values = values.to(weights.dtype)
        factor = self.cyclic_factor(compiled(plain_chord_mix), values, padding_mask)
        return self.in_rank_order(values, weights, padding_mask, factor)

    def cyclic_factor(self, link_mix, values: torch.Tensor, padding_mask: torch.Tensor | None):
        """``ops_psf.cyclic_factor`` with this layer's K."""
        return cyclic_factor(link_mix, values, padding_mask, self.num_links)

    def in_rank_order(self, values: torch.Tensor, weights: torch.Tensor, padding_mask: torch.Tensor | None,
                      factor) -> torch.Tensor:
        """``ops_psf.in_rank_order`` with this layer's ``residual``."""
        return in_rank_order(values, weights, padding_mask, factor, self.settings.residual)

    def dense_factor(self, weights: torch.Tensor, links: torch.Tensor) -> torch.Tensor:
        """The dense ``[B, N, N]`` matrix of one factor (for ``output_attentions`` only)."""
        batch, length, _ = weights.shape
        dense = torch.zeros(batch, length, length, dtype=weights.dtype, device=weights.device)
        dense.scatter_add_(2, links, weights)
        if self.settings.residual:
            dense = dense + torch.eye(length, dtype=weights.dtype, device=weights.device)
        return dense

    def attend(self, hidden_states, padding_mask=None, state=None, output_attentions=False,
               projections=None) -> AttentionOutput:
        batch, length, _ = hidden_states.shape
        links = None
        if output_attentions:
            links = chord_links(padding_mask, batch, length, self.num_links, hidden_states.device)
        weights = self.factor_weights(hidden_states)
        values = self.value(hidden_states) if projections is None else self.merge_heads(projections[2])
        with torch.autocast(hidden_states.device.type, enabled=False):
            compute_dtype = torch.promote_types(values.dtype, torch.float32)  # at least float32, float64 stays
            weights = weights.to(compute_dtype)
            # Attention dropout on the factors' entries (identity in eval). The kernel follows what the caller
            # passes (a mask or None), never the mask's values: no data-dependent branch.
            context = self.mix(values, self.dropout(weights), padding_mask)
            attentions = None
            if output_attentions:
                attentions = self.dense_factor(weights[0], links)
                for m in range(1, self.num_factors):
                    attentions = attentions @ self.dense_factor(weights[m], links)
                attentions = attentions[:, None]
        return AttentionOutput(context.to(values.dtype), attentions=attentions)
