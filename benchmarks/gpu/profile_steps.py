"""Where a training step's time goes: each row of ``hf-effattn bench`` (a mechanism, ``<name>+b<S>``, a peer) built
as the bench builds it, a few forward-and-backward steps under ``torch.profiler``, and for each row:

* the wall time of a step and the GPU's busy time (the sum of its kernels' durations): where the wall time is
  much larger than the busy time, the GPU waits for the host to launch the next kernel (launch-bound); where they
  are close, the kernels themselves are the cost;
* the kernels launched a step (each a separate pass over memory, each a launch);
* the kernels that take the most GPU time, and the PyTorch operators called most often (views and the operators
  called inside others counted too: calls the host makes, not kernels).

It prints a Markdown report and writes it to ``--output`` (default ``profile.md``)::

    python benchmarks/gpu/profile_steps.py --rows local+b512 kerformer+b512 peer:roberta-chunks512 \\
        --length 16384 --tokens_per_step 16384 --hidden_size 768 --num_heads 12 --intermediate_size 3072 \\
        --num_layers 4 --dtype bfloat16 --output profile.md

On a CPU (``--device cpu``) it runs too: its first table is then each operator's own CPU time (outside the operators
it calls), the busy time their sum.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter, defaultdict

import torch

from hf_effattn.benchmark.options import BenchmarkSettings
from hf_effattn.benchmark.subjects import build_subject, make_step


def profile_row(name: str, settings: BenchmarkSettings, steps: int, top: int) -> list[str]:
    """The report's section of row ``name``: warm-up, then ``steps`` profiled steps."""
    step = make_step(build_subject(name, "encoder", settings.lengths[0], settings), "fwd_bwd")
    cuda = settings.device.startswith("cuda")
    for _ in range(2):
        step()
    activities = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA] if cuda else [])
    if cuda:
        torch.cuda.synchronize()
    start = time.perf_counter()
    with torch.profiler.profile(activities=activities) as profiler:
        for _ in range(steps):
            step()
        if cuda:
            torch.cuda.synchronize()
    wall_ms = (time.perf_counter() - start) * 1e3 / steps
    kernels = [event for event in profiler.events() if event.device_type == torch.autograd.DeviceType.CUDA]
    busy_ms = sum(event.device_time for event in kernels) / 1e3 / steps
    by_kernel: dict[str, float] = defaultdict(float)
    for event in kernels:
        by_kernel[event.name] += event.device_time / 1e3 / steps
    calls = Counter(event.name for event in profiler.events()
                       if event.device_type == torch.autograd.DeviceType.CPU and event.name.startswith("aten::"))
    busy = f"GPU busy {busy_ms:.2f} ms ({busy_ms / wall_ms:.0%}), {len(kernels) / steps:.0f} kernels a step"
    if not cuda:  # the CPU's own work: each operator's time outside the operators it calls
        by_kernel = {average.key: average.self_cpu_time_total / 1e3 / steps for average in profiler.key_averages()}
        busy_ms = sum(by_kernel.values())
        busy = f"the operators' own time {busy_ms:.2f} ms"
    lines = [f"## {name}", "", f"wall {wall_ms:.2f} ms a step (profiled, so above the bench's time), {busy}", ""]
    if by_kernel:
        lines += [f"| {'kernel' if cuda else 'operator (self CPU time)'} | ms a step | share of busy |", "|---|---|---|"]
        for kernel, ms in sorted(by_kernel.items(), key=lambda item: -item[1])[:top]:
            lines.append(f"| `{kernel[:90]}` | {ms:.3f} | {ms / busy_ms:.0%} |")
        lines.append("")
    lines += ["| operator | calls a step |", "|---|---|"]
    lines += [f"| `{op}` | {count / steps:.0f} |" for op, count in calls.most_common(top)]
    return lines + [""]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", nargs="+", required=True, metavar="ROW")
    parser.add_argument("--length", type=int, default=16384)
    parser.add_argument("--tokens_per_step", type=int, default=16384)
    parser.add_argument("--hidden_size", type=int, default=768)
    parser.add_argument("--num_heads", type=int, default=12)
    parser.add_argument("--intermediate_size", type=int, default=3072)
    parser.add_argument("--num_layers", type=int, default=4)
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    parser.add_argument("--output", default="profile.md")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    settings = BenchmarkSettings(lengths=[args.length], tokens_per_step=args.tokens_per_step,
                                 hidden_size=args.hidden_size, num_heads=args.num_heads,
                                 intermediate_size=args.intermediate_size, num_layers=args.num_layers,
                                 device=args.device, dtype=args.dtype)
    settings.check()
    lines = [f"# Training steps under torch.profiler: N = {args.length}, {args.tokens_per_step} tokens a step, "
             f"hidden {args.hidden_size}, {args.num_layers} layers, {args.dtype}, {args.device} "
             f"({torch.cuda.get_device_name() if args.device.startswith('cuda') else 'CPU'}, torch "
             f"{torch.__version__})", ""]
    for row in args.rows:
        section = profile_row(row, settings, args.steps, args.top)
        print("\n".join(section), flush=True)
        lines += section
        with open(args.output, "w") as report:
            report.write("\n".join(lines))


if __name__ == "__main__":
    main()
