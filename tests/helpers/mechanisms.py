"""Shared builders for the mechanism-layer tests: small mechanisms with random weights, padded batches."""

from __future__ import annotations

import torch

import hf_effattn
from hf_effattn.modeling.local_settings import split_local_settings

EFFICIENT = ["singularformer", "kerformer", "dba", "psf"]
BASELINES = ["linear", "performer", "nystromformer", "linformer", "cosformer"]  # the papers' efficient baselines
MECHANISMS = EFFICIENT + ["eager", "sdpa"] + BASELINES + ["local"]
WINDOW = {"local_window": 6, "global_tokens": 1}  # the window of the "local" and "<name>+window" cases
WINDOWED = EFFICIENT + BASELINES  # every mechanism that takes a window beside it
HYBRIDS = [f"{name}+window" for name in WINDOWED]
HIDDEN, HEADS, MAX_LENGTH = 16, 2, 16


def resolve(name: str, settings: dict | None = None) -> tuple[str, dict]:
    """A test case's mechanism and settings: ``"local"`` and ``"<name>+window"`` (the mechanism beside a local
    window) get :data:`WINDOW` unless ``settings`` give another window, or blocks (``local_block``: then any
    ``"+<part>"`` suffix is the case's name only)."""
    if "local_block" in (settings or {}):
        return name.partition("+")[0], settings
    if name == "local" or name.endswith("+window"):
        return name.removesuffix("+window"), {**WINDOW, **(settings or {})}
    return name, settings


def build(name: str, settings: dict | None = None, *, dtype=torch.float64, layer_idx: int = 0, seed: int = 0,
          hidden: int = HIDDEN, heads: int = HEADS, max_length: int | None = MAX_LENGTH, std: float = 0.3):
    """Mechanism ``name`` (see :func:`resolve`) in eval mode with every parameter drawn from ``N(0, std^2)``, so that
    no weight sits at a degenerate initial value (PSF's uniform 1/K factors, DBA's tiny Z)."""
    torch.manual_seed(seed)
    name, settings = resolve(name, settings)
    own, local = split_local_settings(settings)  # the cases name the mechanism's settings and the local part's
    attn = hf_effattn.build_attention(name, hidden, heads, own, local=local, max_length=max_length,
                                      layer_idx=layer_idx)
    with torch.no_grad():
        for parameter in attn.parameters():
            parameter.normal_(0.0, std)
    return attn.to(dtype).eval()


def pad(sequences: list[torch.Tensor], sides: list[str], length: int, seed: int = 1, scale: float = 1.0):
    """Batch ``sequences`` (each ``[L_b, C]``) to ``length``, padding each on its side ("right" or
    "left"); pads hold random noise of size ``scale``, so they are never innocuous zeros.
    Returns ``x [B, N, C]`` and ``padding_mask [B, N]`` (True = real)."""
    generator = torch.Generator().manual_seed(seed)
    width, dtype = sequences[0].shape[1], sequences[0].dtype
    x = scale * torch.randn(len(sequences), length, width, generator=generator, dtype=dtype)
    mask = torch.zeros(len(sequences), length, dtype=torch.bool)
    for b, (sequence, side) in enumerate(zip(sequences, sides)):
        start = 0 if side == "right" else length - len(sequence)
        x[b, start : start + len(sequence)] = sequence
        mask[b, start : start + len(sequence)] = True
    return x, mask


def random_batch(lengths: list[int], sides: list[str], length: int, *, dtype=torch.float64, seed: int = 0,
                 width: int = HIDDEN):
    """A padded batch of random sequences of the given real ``lengths``: ``x [B, N, C]``, ``mask [B, N]``."""
    generator = torch.Generator().manual_seed(seed)
    sequences = [torch.randn(n, width, generator=generator, dtype=dtype) for n in lengths]
    return pad(sequences, sides, length, seed=seed + 1)


def mixed_batch(dtype=torch.float64, width: int = HIDDEN):
    """Four sequences in ``N = 10``: full, right-padded, left-padded, a single real token."""
    return random_batch([10, 6, 3, 1], ["right", "right", "left", "left"], 10, dtype=dtype, width=width)


def run_in_mode(attention, x: torch.Tensor, mask: torch.Tensor | None, mode: str) -> list[torch.Tensor]:
    """The context of ``attention`` on ``x``/``mask`` in fast-path ``mode`` (``fast_paths.py``) and its gradients to the
    input and every parameter, under a fixed upstream gradient."""
    from hf_effattn.modeling.fast_paths import fast_paths

    x = x.clone().requires_grad_()
    attention.zero_grad()
    with fast_paths(mode):
        output = attention(x, mask).context
    output.backward(torch.linspace(-1, 1, output.numel(), device=x.device).view_as(output))
    return [output, x.grad, *(p.grad for p in attention.parameters() if p.grad is not None)]


def assert_paths_agree(fast: list[torch.Tensor], exact: list[torch.Tensor]) -> None:
    """Float32 results of two paths that sum in other orders: each within 1e-5 of the other's norm."""
    for actual, expected in zip(fast, exact, strict=True):
        assert torch.linalg.norm(actual - expected) <= 1e-5 * torch.linalg.norm(expected)
