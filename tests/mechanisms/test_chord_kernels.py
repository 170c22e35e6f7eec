"""PSF's CUDA kernels (modeling/chord_kernels.py) against the exact path: one factor's product and its gradients,
padded or not, and the whole layer on the fast path (with ``residual``, beside blocks, beside a window). Without CUDA
the kernels run in Triton's interpreter on the CPU (``TRITON_INTERPRET=1``, which tests/conftest.py sets before Triton
is imported)."""

from __future__ import annotations

import copy
from importlib.util import find_spec

import pytest
import torch

if find_spec("triton") is None:
    pytest.skip("Triton is not installed (the test extra installs it on Linux x86-64)", allow_module_level=True)

from hf_effattn.modeling import chord_kernels, fast_paths  # noqa: E402 - after the skip
from hf_effattn.modeling.attention_psf import PSFAttention, chord_offsets  # noqa: E402 - after the skip
from hf_effattn.modeling.chord_mixes import ChordShiftMix, circular_rows, cyclic_chord_mix  # noqa: E402

from helpers.device_lane import PRECISIONS, flat, relative_error  # noqa: E402
from helpers.mechanisms import assert_paths_agree, build, mixed_batch, run_in_mode  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
KERNEL_MIX = chord_kernels.chord_mix  # before any test replaces it
LENGTH, WIDTH, LINKS = 12, 150, 6  # links reach 16 > N: the modulo wraps; two channel tiles, the second partial


def exact_factor(values: torch.Tensor, weights: torch.Tensor, lengths: list[int]) -> torch.Tensor:
    """The exact path's product of one factor on values in rank order with real ``lengths``."""
    offsets = chord_offsets(LINKS)
    if all(length == LENGTH for length in lengths):
        return ChordShiftMix.apply(values, weights, offsets)
    return cyclic_chord_mix(values, weights, circular_rows(torch.tensor(lengths), LENGTH, max(offsets)), offsets)


# Per element: float32 sums in another order; in bfloat16, besides, each result stored in 8 significant bits once:
# within one unit in the last place, 2^-7 of it (a GPU rounds to the nearest; Triton's interpreter truncates). The
# inputs are values that bfloat16 holds exactly, so that this rounding is the only other difference.
TOLERANCES = {torch.float32: {"atol": 2e-5, "rtol": 1e-5}, torch.bfloat16: {"atol": 2e-5, "rtol": 2 ** -7}}


@pytest.mark.parametrize("dtype", list(TOLERANCES), ids=["float32", "bfloat16"])
@pytest.mark.parametrize("tiles", [None, ((32, 128, 4), (4, 256, 2))], ids=["tuned-tiles", "other-tiles"])
@pytest.mark.parametrize("lengths", [[12, 12], [12, 7, 1]], ids=["full", "padded"])
def test_one_factor_and_its_gradients_equal_the_exact_path(lengths, tiles, dtype, monkeypatch):
    """Outputs and gradients (to values and weights, the pad rows' share included) against the exact path in
    float64, on the kernels' tiles and on others (a tile longer than the sequence, one wider than the channels), on
    values in float32 and in bfloat16 (weights in float32): the output and the gradient to the values in the values'
    dtype, the gradient to the weights in float32."""
    if tiles:
        monkeypatch.setattr(chord_kernels, "GATHER_TILE", tiles[0])
        monkeypatch.setattr(chord_kernels, "WEIGHTS_TILE", tiles[1])
    generator = torch.Generator().manual_seed(0)
    values, upstream = (torch.randn(len(lengths), LENGTH, WIDTH, generator=generator, dtype=torch.float64)
                        .to(dtype).double() for _ in range(2))
    weights = torch.randn(len(lengths), LENGTH, LINKS, generator=generator, dtype=torch.float64).float().double()
    expected = [values.clone().requires_grad_(), weights.clone().requires_grad_()]
    exact_factor(*expected, lengths).backward(upstream)
    actual = [values.to(DEVICE, dtype).requires_grad_(), weights.to(DEVICE, torch.float32).requires_grad_()]
    output = chord_kernels.chord_mix(*actual, torch.tensor(lengths, device=DEVICE), pads=min(lengths) < LENGTH)
    output.backward(upstream.to(DEVICE, dtype))
    assert (output.dtype, actual[0].grad.dtype, actual[1].grad.dtype) == (dtype, dtype, torch.float32)
    torch.testing.assert_close(output.double().cpu(), exact_factor(values, weights, lengths), **TOLERANCES[dtype])
    for tensor, reference in zip(actual, expected):
        torch.testing.assert_close(tensor.grad.double().cpu(), reference.grad, **TOLERANCES[tensor.dtype])


@pytest.fixture
def kernels_here(monkeypatch):
    """PSF's fast path is its Triton kernels on this device (the CUDA check waived on a CPU, where the interpreter
    runs them, instead of the CPU's compiled path)."""
    monkeypatch.setattr(fast_paths, "obstacle", lambda tensor, devices: None)
    monkeypatch.setattr(PSFAttention, "fast_mixes", {DEVICE: "mix_with_kernels"})


@pytest.mark.parametrize("padded", [False, True], ids=["no-mask", "mask"])
@pytest.mark.parametrize("settings", [{}, {"residual": True}, {"local_block": 4}, {"local_window": 6,
                                                                                  "global_tokens": 1}],
                         ids=["plain", "residual", "blocks", "window"])
def test_the_layer_on_the_fast_path_equals_the_exact_path(settings, padded, monkeypatch, kernels_here):
    """PSF's layer with ``fast_paths("fast")`` on the kernels against the exact path: every factor goes through the
    kernels, and the outputs and gradients agree."""
    calls = []

    def counted(*args, **options):
        calls.append(1)
        return KERNEL_MIX(*args, **options)

    monkeypatch.setattr(chord_kernels, "chord_mix", counted)
    attention = build("psf", settings, dtype=torch.float32).to(DEVICE)
    x, mask = mixed_batch(dtype=torch.float32)  # full, right-padded, left-padded, one real token; N = 10
    x, mask = x.to(DEVICE), (mask.to(DEVICE) if padded else None)
    exact = run_in_mode(attention, x, mask, "exact")
    assert not calls
    fast = run_in_mode(attention, x, mask, "fast")
    assert len(calls) == attention.num_factors
    assert_paths_agree(fast, exact)


@pytest.mark.parametrize("padded", [False, True], ids=["no-mask", "mask"])
@pytest.mark.parametrize("settings", [{}, {"local_block": 4}], ids=["plain", "blocks"])
def test_bfloat16_values_stay_in_bfloat16_on_the_kernels(settings, padded, monkeypatch, kernels_here):
    """A layer in bfloat16 hands every factor's kernel its values in bfloat16 (the weights in float32), and its output,
    its gradient to the input and its parameters' gradients (together, as the device lane) are within bfloat16's
    tolerance (the lane's, 2e-2 of the norm) of the float64 exact path's on the same parameters and input."""
    dtypes = []

    def recorded(values, weights, **options):
        dtypes.append((values.dtype, weights.dtype))
        return KERNEL_MIX(values, weights, **options)

    monkeypatch.setattr(chord_kernels, "chord_mix", recorded)
    attention = build("psf", settings, dtype=torch.bfloat16).to(DEVICE)
    x, mask = mixed_batch(dtype=torch.bfloat16)
    mask = mask.to(DEVICE) if padded else None
    fast = run_in_mode(attention, x.to(DEVICE), mask, "fast")
    assert dtypes == [(torch.bfloat16, torch.float32)] * attention.num_factors
    exact = run_in_mode(copy.deepcopy(attention).double(), x.to(DEVICE, torch.float64), mask, "exact")
    for actual, expected in zip((*fast[:2], flat(dict(enumerate(fast[2:])))),
                                (*exact[:2], flat(dict(enumerate(exact[2:])))), strict=True):
        assert relative_error(actual, expected) <= PRECISIONS["bfloat16"].tolerance
