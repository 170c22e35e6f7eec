"""``hf-effattn train-task``: train a small encoder on one of the synthetic tasks (:mod:`hf_effattn.synthetic_tasks`)
and print its held-out accuracy; ``--metrics_file`` writes the whole result as JSON."""

from __future__ import annotations

import argparse
import json

from ..folders.output_folders import check_output_file, write_file_into_place
from ..options.parser_values import ATTENTIONS, NORM_STYLES, POOLINGS, SYNTHETIC_TASKS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("task", choices=SYNTHETIC_TASKS)
    parser.add_argument("--length", type=int, default=256,
                        help="sequence length N (ListOps: the longest expression, padded per batch)")
    parser.add_argument("--attention", default="psf", choices=ATTENTIONS)
    parser.add_argument("--attention_config", type=json.loads, default=None,
                        help='the mechanism\'s settings as JSON, e.g. \'{"rank": 16}\'')
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--batch_size", type=int, default=40)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--warmup_steps", type=int, default=100)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--hidden_size", type=int, default=64)
    parser.add_argument("--num_heads", type=int, default=4)
    parser.add_argument("--dropout", type=float, default=0.0)
    parser.add_argument("--pooling", choices=POOLINGS, default="first",
                        help="first token (default: only token mixing brings the signal there) or the mean over "
                        "real tokens (with which a per-token MLP alone can solve the adding problem)")
    parser.add_argument("--norm_style", choices=NORM_STYLES, default="pre",
                        help="pre-LN layers (ViT's arrangement, stable from scratch) or post-LN (RoBERTa's)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--eval_size", type=int, default=1000)
    parser.add_argument("--eval_every", type=int, default=0, help="also evaluate every this many steps (0: at the end)")
    parser.add_argument("--log_every", type=int, default=100)
    parser.add_argument("--min_length", type=int, default=None,
                        help="ListOps: shortest expression (default length / 4)")
    parser.add_argument("--max_depth", type=int, default=10, help="ListOps: maximum tree depth")
    parser.add_argument("--max_args", type=int, default=10, help="ListOps: most arguments of an operator")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    parser.add_argument("--metrics_file", default=None, help="write the result (settings, losses, accuracy) as JSON")
    parser.add_argument("--overwrite_metrics_file", action="store_true",
                        help="replace --metrics_file where it exists (refused otherwise, before training)")


def run(args) -> int:
    import torch

    from ..synthetic_tasks.training import train_task

    if args.metrics_file:
        check_output_file("metrics_file", args.metrics_file, args.overwrite_metrics_file)  # before training
    if args.threads:
        torch.set_num_threads(args.threads)
    result = train_task(args)
    print(f"{args.task} N={args.length} {args.attention}: held-out accuracy {result['accuracy']:.4f} "
          f"({result['criterion']}, {args.eval_size} samples) after {args.steps} steps, {result['seconds']:.0f} s, "
          f"{result['parameters']:,} parameters")
    if args.metrics_file:
        write_file_into_place(args.metrics_file, json.dumps(result, indent=1))
    return 0
