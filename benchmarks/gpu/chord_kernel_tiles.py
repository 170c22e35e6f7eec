"""How PSF's kernels (``modeling/chord_kernels.py``) are tiled: one factor at the GPU bench's shape (values ``[B, N,
C]`` in ``--dtype``, bfloat16 by default as a layer in bfloat16 hands them over; weights in float32; K links), each
kernel timed at each tile of tokens and channels and each warp count, checked against the exact path first:
``_gather_links`` forward and transposed (the gradient to the values), and ``_weights_backward``, beside a plain copy
of the values (one read and one write). Prints a Markdown table a kernel, best first, and writes them to
``--output``; then, with ``--bench``, runs ``hf-effattn bench``'s arguments in this process with
``chord_kernels.GATHER_TILE`` and ``WEIGHTS_TILE`` set to the best tiles::

    python benchmarks/gpu/chord_kernel_tiles.py --output tiles.md --bench --device cuda ... --attentions psf

CUDA only (``triton.testing.do_bench``).
"""

from __future__ import annotations

import argparse
import itertools

import torch
from triton.testing import do_bench

from hf_effattn.commands.main import main as hf_effattn_main
from hf_effattn.modeling import chord_kernels
from hf_effattn.modeling.attention_psf import chord_offsets
from hf_effattn.modeling.chord_mixes import ChordShiftMix


# The forward against the exact path, each element: float32 sums in another order, and in bfloat16 the result stored
# in 8 significant bits (its rounding, 2^-8 of it, and the sum's); the adjoint identity's relative error likewise.
ROUNDING = {torch.float32: {"rtol": 1e-4, "atol": 1e-4}, torch.bfloat16: {"rtol": 2 ** -7, "atol": 1e-3}}


def tiles(tokens, channels, warps, elements) -> list[tuple[int, int, int]]:
    """Each (tokens, channels, warps) whose tile holds ``elements`` (a range) values, at least one a thread."""
    return [(t, c, w) for t, c, w in itertools.product(tokens, channels, warps) if t * c in elements
            and t * c >= 32 * w]


def time_gather(tile, values, weights, lengths) -> tuple[float, float]:
    """Milliseconds of the forward and the transposed gather on ``tile``, after checking both: the forward against
    the exact path's product (in float32), the transposed as its adjoint (``<G^T u, v> = <u, G v>``)."""
    chord_kernels.GATHER_TILE = tile
    forward = chord_kernels.gather_links(values, weights, lengths, transposed=False)
    exact = ChordShiftMix.apply(values.float(), weights, chord_offsets(weights.shape[2]))
    torch.testing.assert_close(forward.float(), exact, **ROUNDING[values.dtype])
    upstream = torch.roll(values, 1, dims=2)
    adjoint = chord_kernels.gather_links(upstream, weights, lengths, transposed=True)
    torch.testing.assert_close((adjoint.double() * values).sum(), (upstream.double() * forward).sum(),
                               rtol=ROUNDING[values.dtype]["rtol"], atol=0)
    return tuple(do_bench(lambda: chord_kernels.gather_links(values, weights, lengths, transposed)) for transposed
                 in (False, True))


def time_weights(tile, values, lengths, links) -> tuple[float]:
    """Milliseconds of the gradient to the weights on ``tile``, after checking it: ``grad . values`` at each link."""
    chord_kernels.WEIGHTS_TILE = tile
    expected = torch.stack([(values.float() * values.float().roll(-offset, dims=1)).sum(2)
                            for offset in chord_offsets(links)], dim=2)
    torch.testing.assert_close(chord_kernels.weights_backward(values, values, lengths, links), expected, rtol=1e-4,
                               atol=1e-4)  # sums of C float32 products (of bfloat16 values: exact), in another order
    return (do_bench(lambda: chord_kernels.weights_backward(values, values, lengths, links)),)


def table(title: str, columns: list[str], times: dict, floor_ms: float) -> list[str]:
    """Markdown rows of ``times {tile: (ms, ...)}``, best (least summed time) first."""
    lines = [title, "", f"| tokens | channels | warps | {' | '.join(columns)} | over the copy |",
             "|---" * (4 + len(columns)) + "|"]
    for tile in sorted(times, key=lambda tile: sum(times[tile])):
        lines.append(f"| {' | '.join(map(str, tile))} | {' | '.join(f'{ms:.3f}' for ms in times[tile])} | "
                     f"{sum(times[tile]) / floor_ms:.1f}x |")
    return lines + [""]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--length", type=int, default=16384)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--channels", type=int, default=768)
    parser.add_argument("--links", type=int, default=14)
    parser.add_argument("--dtype", choices=("bfloat16", "float32"), default="bfloat16", help="the values' dtype")
    parser.add_argument("--output", default="tiles.md")
    parser.add_argument("--bench", nargs=argparse.REMAINDER, help="hf-effattn bench's arguments, run on the best tiles")
    args = parser.parse_args()
    generator = torch.Generator(device="cuda").manual_seed(0)
    values = torch.randn(args.batch, args.length, args.channels, device="cuda", generator=generator).to(
        getattr(torch, args.dtype))
    weights = torch.randn(args.batch, args.length, args.links, device="cuda", generator=generator)
    lengths = torch.full((args.batch,), args.length, device="cuda")
    copy_ms = do_bench(lambda: values.clone())
    gather_times = {tile: time_gather(tile, values, weights, lengths)
                    for tile in tiles((4, 8, 16, 32), (32, 64, 128, 256), (4, 8, 16), range(256, 2049))}
    weights_times = {tile: time_weights(tile, values, lengths, args.links)
                     for tile in tiles((8, 16, 32, 64), (32, 64, 128, 256), (2, 4, 8), range(512, 8193))}
    lines = [f"# PSF's kernels on one factor: B={args.batch}, N={args.length}, C={args.channels}, K={args.links}, "
             f"values in {args.dtype}, {torch.cuda.get_device_name()}", "",
             f"A copy of the values (one read, one write): {copy_ms:.3f} ms.", "",
             *table("## _gather_links", ["forward ms", "transposed ms"], gather_times, copy_ms),
             *table("## _weights_backward", ["ms"], weights_times, copy_ms)]
    print("\n".join(lines), flush=True)
    with open(args.output, "w") as report:
        report.write("\n".join(lines) + "\n")
    if args.bench:
        chord_kernels.GATHER_TILE = min(gather_times, key=lambda tile: sum(gather_times[tile]))
        chord_kernels.WEIGHTS_TILE = min(weights_times, key=lambda tile: sum(weights_times[tile]))
        print(f"bench on the best tiles: {chord_kernels.GATHER_TILE}, {chord_kernels.WEIGHTS_TILE}", flush=True)
        hf_effattn_main(["bench", *args.bench])


if __name__ == "__main__":
    main()
