"""``results.png``: time and peak memory against the length, log-log, one row of plots per part."""

from __future__ import annotations

from pathlib import Path

import torch

from .machine import machine_description
from .peers import peer_of
from .rows import Row, mechanisms_of, series


def write_plot(rows: list[Row], args, path: Path) -> None:
    """Time (fwd+bwd solid, fwd dashed) and fwd+bwd peak memory against N, log-log, one colour per mechanism;
    circles for ours, squares for the peers."""
    import matplotlib
    import matplotlib.ticker

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(len(args.parts), 2, figsize=(12, 4.5 * len(args.parts)), squeeze=False)
    colours = dict(zip(mechanisms_of(rows), plt.get_cmap("tab20").colors * 2))
    lengths = sorted({row.length for row in rows})
    for (time_axis, memory_axis), part in zip(axes, args.parts):
        for mechanism, colour in colours.items():  # a mechanism absent from this part has no points
            for column, axis, style in (("fwd_bwd_ms", time_axis, "-"), ("fwd_ms", time_axis, "--"),
                                        ("fwd_bwd_peak_mib", memory_axis, "-")):
                points = series(rows, mechanism, part, column)
                if points:
                    label = mechanism if style == "-" else None
                    axis.plot(list(points), list(points.values()), style, marker="s" if peer_of(mechanism) else "o",
                              color=colour, label=label)
        time_axis.set(title=f"{part}: time (solid fwd+bwd, dashed fwd)", ylabel="ms")
        memory_axis.set(title=f"{part}: fwd+bwd peak memory", ylabel="MiB")
        for axis in (time_axis, memory_axis):
            axis.set(xscale="log", yscale="log", xlabel="sequence length N")
            axis.set_xticks(lengths, labels=[str(n) for n in lengths], minor=False)
            axis.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
            axis.grid(True, which="both", alpha=0.3)
            axis.legend(fontsize=8)
    figure.suptitle(f"{machine_description(torch.device(args.device))}; {args.batch_description()}, "
                    f"hidden {args.hidden_size}, {args.num_heads} heads, {args.dtype}", fontsize=9)
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    plt.close(figure)
