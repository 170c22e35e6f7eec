"""benchmarks/gpu/chord_kernel_tiles.py: each tile's kernels are checked against the exact path before they are
timed, so a tile that computes wrong numbers stops the run instead of winning the table (run here in Triton's
interpreter, with the timer replaced: ``do_bench`` needs CUDA)."""

from __future__ import annotations

import sys
from importlib.util import find_spec
from pathlib import Path

import pytest
import torch

if find_spec("triton") is None:
    pytest.skip("Triton is not installed (the test extra installs it on Linux x86-64)", allow_module_level=True)

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "gpu"))
import chord_kernel_tiles  # noqa: E402 - after the path

from hf_effattn.modeling import chord_kernels  # noqa: E402

LENGTH, WIDTH, LINKS = 20, 48, 6


@pytest.fixture(params=[torch.bfloat16, torch.float32], ids=["bfloat16", "float32"])
def factor(monkeypatch, request):
    """One factor's values (in bfloat16, the script's default, and in float32), weights and lengths on the CPU, and
    a timer that runs its function once."""
    monkeypatch.setattr(chord_kernel_tiles, "do_bench", lambda run: (run(), 1.0)[1])
    monkeypatch.setattr(chord_kernels, "GATHER_TILE", chord_kernels.GATHER_TILE)  # restored after the test
    monkeypatch.setattr(chord_kernels, "WEIGHTS_TILE", chord_kernels.WEIGHTS_TILE)
    generator = torch.Generator().manual_seed(0)
    values = torch.randn(1, LENGTH, WIDTH, generator=generator).to(request.param)
    weights = torch.randn(1, LENGTH, LINKS, generator=generator)
    return values, weights, torch.full((1,), LENGTH)


def test_a_tile_is_timed_once_its_kernels_equal_the_exact_path(factor):
    values, weights, lengths = factor
    assert chord_kernel_tiles.time_gather((8, 32, 4), values, weights, lengths) == (1.0, 1.0)
    assert chord_kernel_tiles.time_weights((8, 32, 4), values, lengths, LINKS) == (1.0,)
    assert (chord_kernels.GATHER_TILE, chord_kernels.WEIGHTS_TILE) == ((8, 32, 4), (8, 32, 4))


@pytest.mark.parametrize("broken", ["forward", "transposed", "weights"])
def test_a_tile_whose_kernel_is_wrong_stops_the_run(factor, broken, monkeypatch):
    values, weights, lengths = factor
    gather, weights_backward = chord_kernels.gather_links, chord_kernels.weights_backward

    def gather_links(source, weights, lengths, transposed):
        out = gather(source, weights, lengths, transposed)
        return out.roll(1, dims=1) if broken == ("transposed" if transposed else "forward") else out

    monkeypatch.setattr(chord_kernels, "gather_links", gather_links)
    monkeypatch.setattr(chord_kernels, "weights_backward",
                        lambda *args: weights_backward(*args) * (1.01 if broken == "weights" else 1.0))
    with pytest.raises(AssertionError):
        if broken == "weights":
            chord_kernel_tiles.time_weights((8, 32, 4), values, lengths, LINKS)
        else:
            chord_kernel_tiles.time_gather((8, 32, 4), values, weights, lengths)


def test_the_tiles_tried_hold_their_range_of_values_and_one_a_thread_at_least():
    """A tile of 256 values has no work for 16 warps (512 threads); one of 1,024 is past the range."""
    assert chord_kernel_tiles.tiles((8, 16), (32, 64), (4, 16), range(256, 513)) == [
        (8, 32, 4), (8, 64, 4), (8, 64, 16), (16, 32, 4), (16, 32, 16)]
