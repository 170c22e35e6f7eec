"""Explicit O(N^2) references of every attention mechanism, written from the papers' equations.

Each reference takes one sequence's *real* tokens only (``x [L, C]``, no padding mask: pads simply do
not exist), reuses nothing of the module but its parameters and settings, materialises the ``L x L``
attention matrix the mechanism implies and returns ``context = A @ V`` per head. Comparing the fast
path at real positions of a padded batch against these proves both the arithmetic and that pads are
invisible. Notation as in ``docs/mechanisms/index.md`` (each mechanism's equations and choices on its page
there, ``docs/mechanisms/<name>.md``): ``h`` heads of width ``d = C / h``.

A mechanism with an exact local part (``local_window`` or ``local_block``) is checked against
:func:`windowed_reference`: the local part's own masked O(N^2) softmax, beside the mechanism's reference, either
under one normaliser (the kernelized mechanisms, from their unnormalised similarities, :data:`KERNEL_SIMILARITIES`)
or mixed per head.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from hf_effattn.modeling.hybrid_attention import HybridAttention


@dataclass
class Reference:
    """What a reference gives for one sequence of L real tokens.

    ``context [L, C]``; ``attention [h, L, L]`` (one head for PSF); ``state``: what flows on to the
    next layer, per sequence; ``aux_loss``: the scalar regulariser of this sequence, or None."""

    context: torch.Tensor
    attention: torch.Tensor
    state: torch.Tensor | None = None
    aux_loss: torch.Tensor | None = None


def linear(x: torch.Tensor, layer: torch.nn.Linear) -> torch.Tensor:
    """``x W^T + b`` with the weights of ``layer``."""
    return F.linear(x, layer.weight, layer.bias)


def split(x: torch.Tensor, heads: int) -> torch.Tensor:
    """``[L, h * d] -> [h, L, d]``."""
    return x.reshape(x.shape[0], heads, -1).transpose(0, 1)


def merge(x: torch.Tensor) -> torch.Tensor:
    """``[h, L, d] -> [L, h * d]``."""
    return x.transpose(0, 1).reshape(x.shape[1], -1)


def projections(attn, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Q, K, V of the mechanism's own projections, each ``[h, L, d]``."""
    return tuple(split(linear(x, layer), attn.num_heads) for layer in (attn.query, attn.key, attn.value))


def attend(attention: torch.Tensor, value: torch.Tensor, **extras) -> Reference:
    """``context = A @ V`` per head, heads merged: ``attention [h, L, L]``, ``value [h, L, d]``."""
    return Reference(merge(attention @ value), attention, **extras)


def vanilla_reference(attn, x: torch.Tensor, state=None) -> Reference:
    """Softmax attention, Vaswani et al. Eq. 1: ``A = softmax(Q K^T / sqrt(d))``."""
    query, key, value = projections(attn, x)
    attention = torch.softmax(query @ key.transpose(-1, -2) / math.sqrt(query.shape[-1]), dim=-1)
    return attend(attention, value)


def off_diagonal(gram: torch.Tensor) -> torch.Tensor:
    """``||G o (1 - I)||_F^2 / r^2`` of Singularformer Eqs. 15-16, for ``gram [..., r, r]``."""
    r = gram.shape[-1]
    return (gram * (1 - torch.eye(r, dtype=gram.dtype))).pow(2).sum((-1, -2)) / r**2


def singularformer_reference(attn, x: torch.Tensor, state: torch.Tensor | None = None) -> Reference:
    """Singularformer (Wu et al., IJCAI 2023, Sec. 3).

    Eq. 14: ``P = X W_a + b_a`` ``[L, r]``; Eq. 10: ``alpha = softmax_r(P)``; Eqs. 11-13:
    ``alpha_hat = softmax_L(P^T)``; Eq. 9 with the ``1/sqrt(d)`` of ``docs/mechanisms/singularformer.md`` and
    RealFormer's residual (``state``: the previous layer's S): ``A' = softmax(S)``,
    ``S = (alpha_hat Q)(alpha_hat K)^T / sqrt(d) + S_prev``; Eq. 8 / 18: ``A = alpha A' alpha_hat``.
    Aux loss, Eqs. 15-17: ``gamma_1 L_orth + gamma_2 mean_heads L_diag``, with Eq. 15's second Gram
    matrix taken as ``alpha_hat alpha_hat^T`` (r x r). State: S ``[h, r, r]``."""
    settings = attn.settings
    logits = linear(x, attn.pooling)
    alpha, alpha_hat = torch.softmax(logits, dim=-1), torch.softmax(logits.T, dim=-1)
    query, key, value = projections(attn, x)
    scores = (alpha_hat @ query) @ (alpha_hat @ key).transpose(-1, -2) / math.sqrt(query.shape[-1])
    if settings.residual_attention and state is not None:
        scores = scores + state
    core = torch.softmax(scores, dim=-1)
    orthogonal = off_diagonal(alpha.T @ alpha) + off_diagonal(alpha_hat @ alpha_hat.T)
    aux_loss = settings.gamma_orthogonal * orthogonal + settings.gamma_diagonal * off_diagonal(core).mean()
    return attend(alpha @ core @ alpha_hat, value, state=scores if settings.residual_attention else None,
                  aux_loss=aux_loss)


def kerformer_similarity(attn, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Kerformer (Gan et al. 2023). Eq. 7: ``phi = sigmoid``; Eq. 8: ``varphi = softmax`` over d per
    token; Sec. 3.5 SE-K on ``varphi(K)``: mean over the L tokens, two linear layers (no ReLU),
    sigmoid -> one weight per position j (``token``) or per channel (``channel``), none for ``none``.
    Returns ``phi(q_i) . k'_j`` ``[h, L, L]`` and V."""
    query, key, value = projections(attn, x)
    keys = torch.softmax(key, dim=-1)
    mode = attn.settings.se_mode
    if mode != "none":
        weights = torch.sigmoid(linear(linear(keys.mean(1), attn.se_reduce), attn.se_expand))
        keys = keys * (weights[:, : x.shape[0], None] if mode == "token" else weights[:, None, :])
    return torch.sigmoid(query) @ keys.transpose(-1, -2), value


def kerformer_reference(attn, x: torch.Tensor, state=None) -> Reference:
    """Kerformer, Eqs. 4-5 / 9: ``A_ij = phi(q_i) . k'_j / (sum_j phi(q_i) . k'_j + eps)``."""
    similarity, value = kerformer_similarity(attn, x)
    return attend(similarity / (similarity.sum(-1, keepdim=True) + attn.settings.eps), value)


def dba_reference(attn, x: torch.Tensor, state: torch.Tensor | None = None) -> Reference:
    """DBA (Qin et al.), paper form. Z ``[d_p, C]``: ``state`` or, in the first layer, the parameter.
    Eqs. 11-12: ``W_r = softmax_L(Z Q^T / sqrt(d))``, ``W_c = softmax_L(Z K^T / sqrt(d))``;
    Sec. 3.2: ``Q_DBA = (W_r Q) R``, ``K_DBA = (W_c K) R``; Eq. 10:
    ``P' = softmax(Q_DBA K_DBA^T / sqrt(d_in / h))``; Sec. 3.3: ``W'_c = softmax_L(X U_c)``,
    ``W'_r = softmax_{d_p}(X U_r)``; Eq. 6: ``A = W'_r P' W'_c^T``. State: ``W_r Q``, heads merged."""
    query, key, value = projections(attn, x)
    heads, scale = attn.num_heads, math.sqrt(query.shape[-1])
    z = split(attn.compression_input if state is None else state, heads)  # [h, d_p, d]
    compressed_query = torch.softmax(z @ query.transpose(-1, -2) / scale, dim=-1) @ query
    compressed_key = torch.softmax(z @ key.transpose(-1, -2) / scale, dim=-1) @ key
    query_dba, key_dba = compressed_query @ attn.hidden_compression, compressed_key @ attn.hidden_compression
    core = torch.softmax(query_dba @ key_dba.transpose(-1, -2) / math.sqrt(query_dba.shape[-1]), dim=-1)
    rows = torch.softmax(split(linear(x, attn.row_reconstruction), heads), dim=-1)  # W'_r [h, L, d_p]
    columns = torch.softmax(split(linear(x, attn.column_reconstruction), heads), dim=1)  # W'_c [h, L, d_p]
    return attend(rows @ core @ columns.transpose(-1, -2), value, state=merge(compressed_query))


def chord_factor(weights: torch.Tensor) -> torch.Tensor:
    """Dense ``[L, L]`` factor of PSF Eq. 3 from its non-zeros ``weights [L, K]``: entry k of row i
    sits at column ``i`` (k = 1) or ``(i + 2^(k-2)) mod L`` (k = 2..K), the Chord links of Eq. 1
    (links that coincide for a short L add up)."""
    length, links = weights.shape
    offsets = torch.tensor([0] + [2 ** (k - 2) for k in range(2, links + 1)])
    rows = torch.arange(length)[:, None].expand(length, links)  # entry (i, k) of the non-zeros sits in row i ...
    columns = (rows + offsets) % length  # ... at column (i + offset_k) mod L
    return torch.zeros(length, length, dtype=weights.dtype).index_put((rows, columns), weights, accumulate=True)


def psf_reference(attn, x: torch.Tensor, state=None, factor_masks: torch.Tensor | None = None) -> Reference:
    """PSF-Attn (Khalitov et al., Secs. 3-4), one head. Eq. 3: factor m's non-zeros are
    ``f_m(x_i) = GELU(x_i W_in + b_in) W_out + b_out`` on the Chord links of Eq. 1, modulo the real
    length L; ``A = W_1 W_2 ... W_M`` (each ``W_m + I`` with the residual option);
    ``context = A g(X)``, g the value projection. ``factor_masks [M, L, K]`` (dropout) multiply the non-zeros."""
    attention = torch.eye(x.shape[0], dtype=x.dtype)
    masks = torch.ones(len(attn.factor_in_weight), 1, 1, dtype=x.dtype) if factor_masks is None else factor_masks
    for w_in, b_in, w_out, b_out, mask in zip(attn.factor_in_weight, attn.factor_in_bias, attn.factor_out_weight,
                                              attn.factor_out_bias, masks):
        factor = chord_factor((F.gelu(x @ w_in + b_in) @ w_out + b_out) * mask)
        if attn.settings.residual:
            factor = factor + torch.eye(x.shape[0], dtype=x.dtype)
        attention = attention @ factor
    return Reference(attention @ linear(x, attn.value), attention[None])


def nystromformer_reference(attn, x: torch.Tensor, state=None) -> Reference:
    """Nyströmformer (Xiong et al., AAAI 2021, Sec. 3). Landmarks: the means of m contiguous segments of the
    L tokens (token t in segment ``floor(t m / L)``; empty segments, when L < m, give none);
    ``F = softmax(Q K~^T / sqrt(d))``, ``A_S = softmax(Q~ K~^T / sqrt(d))``, ``B = softmax(Q~ K^T / sqrt(d))``;
    Lemma 1: ``Z_{j+1} = 1/4 Z_j (13 I - A_S Z_j (15 I - A_S Z_j (7 I - A_S Z_j)))`` from
    ``Z_0 = A_S^T / (||A_S||_1 ||A_S||_inf)``; the convolution skip as the banded matrix
    ``T_ij = w[j - i + k // 2]`` of each head's kernel w; ``A = F Z B + T``."""
    query, key, value = projections(attn, x)
    length, settings = x.shape[0], attn.settings
    segments = [[t for t in range(length) if t * settings.num_landmarks // length == s]
                for s in range(settings.num_landmarks)]
    segments = [members for members in segments if members]
    query_landmarks = torch.stack([query[:, members].mean(1) for members in segments], 1)  # [h, m', d]
    key_landmarks = torch.stack([key[:, members].mean(1) for members in segments], 1)
    scale = math.sqrt(query.shape[-1])
    kernel_1 = torch.softmax(query @ key_landmarks.transpose(-1, -2) / scale, dim=-1)
    kernel_2 = torch.softmax(query_landmarks @ key_landmarks.transpose(-1, -2) / scale, dim=-1)
    kernel_3 = torch.softmax(query_landmarks @ key.transpose(-1, -2) / scale, dim=-1)
    norms = torch.linalg.matrix_norm(kernel_2, ord=1) * torch.linalg.matrix_norm(kernel_2, ord=math.inf)
    z, identity = kernel_2.transpose(-1, -2) / norms[:, None, None], torch.eye(len(segments), dtype=x.dtype)
    for _ in range(settings.pinv_iterations):
        product = kernel_2 @ z
        z = 0.25 * z @ (13 * identity - product @ (15 * identity - product @ (7 * identity - product)))
    attention = kernel_1 @ z @ kernel_3
    if settings.conv_kernel_size is not None:
        taps, half = attn.conv.weight[:, 0, :, 0], settings.conv_kernel_size // 2  # [h, k]
        positions = torch.arange(length)
        offsets = positions[None, :] - positions[:, None] + half  # j - i + k // 2, [L, L]
        banded = (offsets >= 0) & (offsets < settings.conv_kernel_size)
        attention = attention + taps[:, offsets.clamp(0, settings.conv_kernel_size - 1)] * banded
    return attend(attention, value)


def linformer_reference(attn, x: torch.Tensor, state=None) -> Reference:
    """Linformer (Wang et al. 2020, Sec. 4, Eq. 7), the L tokens using the first L columns of E and F
    (F = E with ``share_kv``): ``P = softmax(Q (E K)^T / sqrt(d))``, ``context = P (F V)``, so ``A = P F``."""
    query, key, value = projections(attn, x)
    length = x.shape[0]
    e = attn.key_projection[:, :length]
    f = (attn.key_projection if attn.settings.share_kv else attn.value_projection)[:, :length]
    probs = torch.softmax(query @ (e @ key).transpose(-1, -2) / math.sqrt(query.shape[-1]), dim=-1)
    return attend(probs @ f, value)


def linear_similarity(attn, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Linear attention (Katharopoulos et al. 2020). Eq. 7: ``phi(x) = elu(x) + 1``: ``phi(q_i) . phi(k_j)``, V."""
    query, key, value = projections(attn, x)
    return (F.elu(query) + 1) @ (F.elu(key) + 1).transpose(-1, -2), value


def linear_reference(attn, x: torch.Tensor, state=None) -> Reference:
    """Linear attention, Eq. 4: ``A_ij = phi(q_i) . phi(k_j) / (sum_j phi(q_i) . phi(k_j) + eps)``."""
    similarity, value = linear_similarity(attn, x)
    return attend(similarity / (similarity.sum(-1, keepdim=True) + attn.settings.eps), value)


def performer_reference(attn, x: torch.Tensor, state=None) -> Reference:
    """Performer, FAVOR+ (Choromanski et al. 2021, Lemma 1) with the module's own random features ``W [m, d]``:
    ``phi(x) = exp(W x' - |x'|^2 / 2) / sqrt(m)``, ``x' = x / d^(1/4)``, unstabilised;
    ``A_ij = phi(q_i) . phi(k_j) / sum_j phi(q_i) . phi(k_j)``."""
    query, key, value = projections(attn, x)
    features = attn.random_features

    def phi(z):
        z = z / z.shape[-1] ** 0.25
        return torch.exp(z @ features.T - (z * z).sum(-1, keepdim=True) / 2) / math.sqrt(len(features))

    similarity = phi(query) @ phi(key).transpose(-1, -2)
    return attend(similarity / similarity.sum(-1, keepdim=True), value)


def cosformer_similarity(attn, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """cosFormer (Qin et al. 2022, Sec. 3): ``s_ij = relu(q_i) . relu(k_j) cos(pi/2 (i - j) / M)``, M = L (the
    sequence length, here its real tokens); and V."""
    query, key, value = projections(attn, x)
    positions = torch.arange(x.shape[0], dtype=x.dtype)
    reweighting = torch.cos(math.pi / 2 * (positions[:, None] - positions[None, :]) / x.shape[0])
    return (torch.relu(query) @ torch.relu(key).transpose(-1, -2)) * reweighting, value


def cosformer_reference(attn, x: torch.Tensor, state=None) -> Reference:
    """cosFormer: ``A_ij = s_ij / max(sum_j s_ij, eps)``."""
    similarity, value = cosformer_similarity(attn, x)
    return attend(similarity / similarity.sum(-1, keepdim=True).clamp_min(attn.settings.eps), value)


REFERENCES = {
    "singularformer": singularformer_reference,
    "kerformer": kerformer_reference,
    "dba": dba_reference,
    "psf": psf_reference,
    "eager": vanilla_reference,
    "sdpa": vanilla_reference,
    "nystromformer": nystromformer_reference,
    "linformer": linformer_reference,
    "linear": linear_reference,
    "performer": performer_reference,
    "cosformer": cosformer_reference,
}


KERNEL_SIMILARITIES = {"kerformer": kerformer_similarity, "linear": linear_similarity,
                       "cosformer": cosformer_similarity}


def exact_pairs(length: int, radius: int, global_tokens: int) -> torch.Tensor:
    """``[L, L]`` bool: the pairs (query i, key j) attended exactly, ``|i - j| <= r`` or either is global (Longformer
    Sec. 3.1: sliding window and symmetric global attention), with r = ``local_window // 2``."""
    positions = torch.arange(length)
    near = (positions[:, None] - positions[None, :]).abs() <= radius
    return near | (positions[None, :] < global_tokens) | (positions[:, None] < global_tokens)


def block_pairs(length: int, size: int, global_tokens: int) -> torch.Tensor:
    """``[L, L]`` bool: the pairs attended exactly beside aligned blocks of ``size`` tokens: both in the same block
    (tokens ``k size .. (k + 1) size - 1``), or either global. The block-diagonal mask, written as a loop over the
    blocks."""
    pairs = torch.zeros(length, length, dtype=torch.bool)
    for start in range(0, length, size):
        pairs[start:start + size, start:start + size] = True
    pairs[:, :global_tokens] = pairs[:global_tokens, :] = True
    return pairs


def local_attention(attn, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The local part's softmax over its exact pairs ``[h, L, L]`` (the window's or the blocks'), the pairs, and the
    scores ``Q K^T / sqrt(d)``."""
    query, key, _ = projections(attn, x)
    scores = query @ key.transpose(-1, -2) / math.sqrt(query.shape[-1])
    local = attn.local
    if local.local_block is not None:
        pairs = block_pairs(x.shape[0], local.local_block, local.global_tokens)
    else:
        pairs = exact_pairs(x.shape[0], local.local_window // 2, local.global_tokens)
    return torch.softmax(scores.masked_fill(~pairs, -math.inf), dim=-1), pairs, scores


def windowed_reference(attn, x: torch.Tensor, state=None) -> Reference:
    """A mechanism beside its exact local part (a window or aligned blocks), sigma = ``sigmoid(mechanism_logit)``
    per head:

    * ``local`` (the local part alone): ``A = softmax`` over the exact pairs;
    * kernelized: one normaliser, ``A_ij = ((1 - sigma) e_ij [exact] + sigma s_ij [outside]) / sum_j (...)`` with
      ``s_ij`` the mechanism's unnormalised similarity (LoLCATs) and, beside a window, ``e_ij = exp(score_ij - max_exact
      score_i)``; beside blocks, ``e_ij`` the softmax over the exact pairs (a block row adds 1 to the normaliser).
      With ``mechanism_outside_window`` False the mechanism's terms cover every key (the global rows stay exact);
      where ``shares_normaliser`` is False (the model's ``shared_normaliser``; None: False beside blocks), they are
      mixed as the others';
    * others: ``(1 - sigma) A_local + sigma A_mechanism`` (context likewise), the global rows the local part's.
    """
    local, pairs, scores = local_attention(attn, x)
    value = projections(attn, x)[2]
    if attn.window.initial_mechanism_weight is None:
        return attend(local, value)
    sigma = torch.sigmoid(attn.window.mechanism_logit)[:, None, None]
    if attn.name in KERNEL_SIMILARITIES and attn.shares_normaliser:
        similarity, _ = KERNEL_SIMILARITIES[attn.name](attn, x)
        if attn.local.local_block is not None:
            exact = local
        else:
            exact = torch.exp(scores - scores.masked_fill(~pairs, -math.inf).amax(-1, keepdim=True)) * pairs
        global_rows = (torch.arange(x.shape[0]) < attn.window.global_tokens)[:, None]  # exact over every key
        outside = similarity * (~pairs if attn.mechanism_outside_window else ~global_rows)
        terms = (1 - sigma) * exact + sigma * outside
        return attend(terms / terms.sum(-1, keepdim=True), value)
    mechanism = REFERENCES[attn.name](attn, x, state)
    global_rows = (torch.arange(x.shape[0]) < attn.window.global_tokens)[:, None]
    attention = torch.where(global_rows, local, (1 - sigma) * local + sigma * mechanism.attention)
    context = torch.where(global_rows, local @ value, (1 - sigma) * (local @ value) + sigma * split(
        mechanism.context, attn.num_heads))
    return Reference(merge(context), attention, state=mechanism.state, aux_loss=mechanism.aux_loss)


def reference(attn, x: torch.Tensor, padding_mask: torch.Tensor, state=None) -> list[Reference]:
    """The reference of every sequence of a padded batch, on its real tokens only.

    ``x [B, N, C]``, ``padding_mask [B, N]`` (True = real), ``state``: batched, as the module takes it."""
    of = windowed_reference if isinstance(attn, HybridAttention) else REFERENCES[attn.name]
    return [of(attn, x[b][padding_mask[b]], None if state is None else state[b]) for b in range(x.shape[0])]
