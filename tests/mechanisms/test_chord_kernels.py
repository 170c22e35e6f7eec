"""PSF's CUDA kernels (modeling/chord_kernels.py) against the exact path: one factor's product and its gradients,
padded or not, and the whole layer on the fast path (with ``residual``, beside blocks, beside a window). Without CUDA
the kernels run in Triton's interpreter on the CPU (``TRITON_INTERPRET=1``, which tests/conftest.py sets before Triton
is imported)."""

from __future__ import annotations

from importlib.util import find_spec

import pytest
import torch

if find_spec("triton") is None:
    pytest.skip("Triton is not installed (the test extra installs it on Linux x86-64)", allow_module_level=True)

from hf_effattn.modeling import chord_kernels, fast_paths  # noqa: E402 - after the skip
from hf_effattn.modeling.attention_psf import (  # noqa: E402 - after the skip
    ChordShiftMix,
    chord_offsets,
    circular_rows,
    cyclic_window_mix,
)

from helpers.mechanisms import build, mixed_batch  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
KERNEL_MIX = chord_kernels.chord_mix  # before any test replaces it
LENGTH, WIDTH, LINKS = 12, 150, 6  # links reach 16 > N: the modulo wraps; two channel tiles, the second partial


def exact_factor(values: torch.Tensor, weights: torch.Tensor, lengths: list[int]) -> torch.Tensor:
    """The exact path's product of one factor on values in rank order with real ``lengths``."""
    offsets = chord_offsets(LINKS)
    if all(length == LENGTH for length in lengths):
        return ChordShiftMix.apply(values, weights, offsets)
    mask = torch.arange(LENGTH) < torch.tensor(lengths)[:, None]
    return cyclic_window_mix(values, weights, circular_rows(mask, max(offsets)), offsets)


@pytest.mark.parametrize("lengths", [[12, 12], [12, 7, 1]], ids=["full", "padded"])
def test_one_factor_and_its_gradients_equal_the_exact_path(lengths):
    """Outputs and gradients (to values and weights, the pad rows' share included) against the exact path in
    float64."""
    generator = torch.Generator().manual_seed(0)
    values, upstream = (torch.randn(len(lengths), LENGTH, WIDTH, generator=generator, dtype=torch.float64)
                        for _ in range(2))
    weights = torch.randn(len(lengths), LENGTH, LINKS, generator=generator, dtype=torch.float64)
    expected = [values.clone().requires_grad_(), weights.clone().requires_grad_()]
    exact_factor(*expected, lengths).backward(upstream)
    actual = [t.to(DEVICE, torch.float32).requires_grad_() for t in (values, weights)]
    output = chord_kernels.chord_mix(*actual, torch.tensor(lengths, device=DEVICE), pads=min(lengths) < LENGTH)
    output.backward(upstream.to(DEVICE, torch.float32))
    torch.testing.assert_close(output.double().cpu(), exact_factor(values, weights, lengths), atol=2e-5, rtol=1e-5)
    for tensor, reference in zip(actual, expected):
        torch.testing.assert_close(tensor.grad.double().cpu(), reference.grad, atol=2e-5, rtol=1e-5)


def layer_run(attention, x, mask, mode, monkeypatch):
    """Output and gradients (to the input and every parameter) of ``attention`` on ``x``/``mask`` in fast-path
    ``mode``, and how many factors the kernels applied."""
    calls = []

    def counted(*args, **options):
        calls.append(1)
        return KERNEL_MIX(*args, **options)

    monkeypatch.setattr(chord_kernels, "chord_mix", counted)
    x = x.clone().requires_grad_()
    attention.zero_grad()
    with fast_paths.fast_paths(mode):
        output = attention(x, mask).context
    output.backward(torch.linspace(-1, 1, output.numel(), device=DEVICE).view_as(output))
    return [output, x.grad, *(p.grad for p in attention.parameters() if p.grad is not None)], len(calls)


@pytest.mark.parametrize("padded", [False, True], ids=["no-mask", "mask"])
@pytest.mark.parametrize("settings", [{}, {"residual": True}, {"local_block": 4}, {"local_window": 6,
                                                                                  "global_tokens": 1}],
                         ids=["plain", "residual", "blocks", "window"])
def test_the_layer_on_the_fast_path_equals_the_exact_path(settings, padded, monkeypatch):
    """PSF's layer with ``fast_paths("fast")`` (the CUDA check waived on a CPU, where the interpreter runs the
    kernels) against the exact path: every factor goes through the kernels, and the outputs and gradients agree."""
    monkeypatch.setattr(fast_paths, "obstacle", lambda tensor: None)
    attention = build("psf", settings, dtype=torch.float32).to(DEVICE)
    x, mask = mixed_batch(dtype=torch.float32)  # full, right-padded, left-padded, one real token; N = 10
    x, mask = x.to(DEVICE), (mask.to(DEVICE) if padded else None)
    exact, exact_calls = layer_run(attention, x, mask, "exact", monkeypatch)
    fast, fast_calls = layer_run(attention, x, mask, "fast", monkeypatch)
    assert (exact_calls, fast_calls) == (0, attention.num_factors)
    for actual, expected in zip(fast, exact, strict=True):  # float32 both, summed in other orders: rounding apart
        assert torch.linalg.norm(actual - expected) <= 1e-5 * torch.linalg.norm(expected)


def test_without_cuda_the_fast_path_falls_back_or_says_why():
    """On a CPU tensor, ``"auto"`` runs the exact path and ``"fast"`` raises the mode's one-line error."""
    if DEVICE == "cuda":
        pytest.skip("the CPU's refusal, checked where there is no GPU")
    attention = build("psf", dtype=torch.float32)
    x, mask = mixed_batch(dtype=torch.float32)
    with fast_paths.fast_paths("auto"):
        auto = attention(x, mask).context
    torch.testing.assert_close(auto, attention(x, mask).context, atol=0, rtol=0)
    with fast_paths.fast_paths("fast"), pytest.raises(RuntimeError, match="factor product cannot run: the tensors"):
        attention(x, mask)


def test_kernels_that_fail_fall_back_to_the_exact_path_in_auto_mode(monkeypatch, caplog):
    """Where the kernels fail (a Triton that cannot compile them), ``"auto"`` logs one line and runs the exact path
    from then on; ``"fast"`` raises the error."""
    monkeypatch.setattr(fast_paths, "obstacle", lambda tensor: None)
    monkeypatch.setattr(fast_paths, "_failed", set())

    def failing(*args, **options):
        raise RuntimeError("no kernel today")

    monkeypatch.setattr(chord_kernels, "chord_mix", failing)
    attention = build("psf", dtype=torch.float32).to(DEVICE)
    x, mask = (t.to(DEVICE) for t in mixed_batch(dtype=torch.float32))
    with fast_paths.fast_paths("fast"), pytest.raises(RuntimeError, match="no kernel today"):
        attention(x, mask)
    with fast_paths.fast_paths("exact"):
        exact = attention(x, mask).context
    with fast_paths.fast_paths("auto"):
        first, second = attention(x, mask).context, attention(x, mask).context
    torch.testing.assert_close(first, exact, atol=0, rtol=0)
    torch.testing.assert_close(second, exact, atol=0, rtol=0)
    said = [record.getMessage() for record in caplog.records if "did not compile" in record.getMessage()]
    assert len(said) == 1 and "factor product" in said[0] and "no kernel today" in said[0]
