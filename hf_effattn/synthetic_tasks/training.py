"""``hf-effattn train-task``: train a small encoder on a synthetic task on fresh samples and report the
accuracy by the paper's criterion on a held-out set.

Every step draws a fresh batch from a seeded generator (the held-out set comes from a separate seed), trains
with Adam (the PSF paper's optimiser: learning rate 1e-3, batch size 40), a linear warm-up then linear decay,
and gradient clipping at norm 1. Loss: mean squared error for the adding problem, cross-entropy otherwise,
plus the mechanisms' auxiliary loss.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from dataclasses import dataclass
from typing import Callable, NamedTuple

import torch
import torch.nn.functional as F

from ..modeling.attentions import list_attentions
from ..output_folders import check_output_file, write_file_into_place
from .generators import (
    LISTOPS_VOCAB, TEMPORAL_ORDER_SYMBOLS, adding_problem, encode_listops, listops, temporal_order,
)
from .model import NORM_STYLES, POOLINGS, SyntheticTaskModel, encoder_config

ADDING_TOLERANCE = 0.04  # a prediction is correct if |y - y_hat| < 0.04 (PSF paper, Sec. 5.2)
EVAL_SEED_OFFSET = 1_000_003  # the held-out set's seed, away from the training seed


class Batch(NamedTuple):
    """``inputs`` ``[B, N]`` token ids or ``[B, N, 2]`` pairs, ``padding_mask`` ``[B, N]`` or None, ``targets [B]``."""

    inputs: torch.Tensor
    padding_mask: torch.Tensor | None
    targets: torch.Tensor


def adding_batch(num_samples: int, args, rng: random.Random) -> Batch:
    inputs, targets = adding_problem(num_samples, args.length, rng)
    return Batch(inputs, None, targets)


def temporal_order_batch(num_samples: int, args, rng: random.Random) -> Batch:
    tokens, labels = temporal_order(num_samples, args.length, rng)
    return Batch(tokens, None, labels)


def listops_batch(num_samples: int, args, rng: random.Random) -> Batch:
    """Expressions of ``[--min_length, --length]`` tokens, padded to the longest of the batch."""
    samples = listops(num_samples, rng, max_length=args.length, min_length=args.min_length or args.length // 4,
                      max_depth=args.max_depth, max_args=args.max_args)
    return Batch(*encode_listops(samples, max(len(sample.tokens) for sample in samples)))


@dataclass(frozen=True)
class Task:
    """A synthetic task: how to draw a batch, and the model's input and output sizes (1 output = regression)."""

    sample: Callable[[int, argparse.Namespace, random.Random], Batch]
    num_outputs: int
    vocab_size: int | None = None
    input_dim: int | None = None

    @property
    def is_regression(self) -> bool:
        return self.num_outputs == 1

    def loss(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        if self.is_regression:
            return F.mse_loss(outputs.squeeze(-1), targets)
        return F.cross_entropy(outputs, targets)

    def correct(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """``[B]`` bool: within the tolerance (regression) or the arg-max class (classification)."""
        if self.is_regression:
            return (outputs.squeeze(-1) - targets).abs() < ADDING_TOLERANCE
        return outputs.argmax(-1) == targets

    @property
    def criterion(self) -> str:
        return f"|y - y_hat| < {ADDING_TOLERANCE}" if self.is_regression else "arg-max class"


TASKS = {
    "adding": Task(adding_batch, num_outputs=1, input_dim=2),
    "temporal-order": Task(temporal_order_batch, num_outputs=4, vocab_size=len(TEMPORAL_ORDER_SYMBOLS)),
    "listops": Task(listops_batch, num_outputs=10, vocab_size=len(LISTOPS_VOCAB)),
}


def build_model(task: Task, args) -> SyntheticTaskModel:
    config = encoder_config(
        attention=args.attention, attention_config=args.attention_config, length=args.length,
        hidden_size=args.hidden_size, num_heads=args.num_heads, num_layers=args.layers, dropout=args.dropout,
    )
    return SyntheticTaskModel(config, task.num_outputs, vocab_size=task.vocab_size, input_dim=task.input_dim,
                              pooling=args.pooling, norm_style=args.norm_style)


def warmup_then_linear_decay(warmup_steps: int, total_steps: int) -> Callable[[int], float]:
    """Learning-rate factor of step ``s``: linear from 0 to 1 over ``warmup_steps``, then linear down to 0."""
    def factor(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        return max(0.0, (total_steps - step) / max(1, total_steps - warmup_steps))

    return factor


def to_device(batch: Batch, device) -> Batch:
    return Batch(*(None if tensor is None else tensor.to(device) for tensor in batch))


@torch.no_grad()
def evaluate(model: SyntheticTaskModel, task: Task, batches: list[Batch], device) -> dict[str, float]:
    """Accuracy by the task's criterion and the mean loss over the held-out ``batches``."""
    model.eval()
    correct = total = 0
    loss_sum = 0.0
    for batch in batches:
        inputs, mask, targets = to_device(batch, device)
        outputs, _ = model(inputs, mask)
        correct += task.correct(outputs, targets).sum().item()
        loss_sum += task.loss(outputs, targets).item() * len(targets)
        total += len(targets)
    return {"accuracy": correct / total, "loss": loss_sum / total}


def held_out_batches(task: Task, args) -> list[Batch]:
    """``--eval_size`` samples from the evaluation seed, in batches of ``--batch_size``."""
    rng = random.Random(args.seed + EVAL_SEED_OFFSET)
    sizes = [min(args.batch_size, args.eval_size - start) for start in range(0, args.eval_size, args.batch_size)]
    return [task.sample(size, args, rng) for size in sizes]


def train_task(args) -> dict:
    """Train on fresh batches for ``--steps`` steps; returns the settings, the training losses, the evaluations
    (every ``--eval_every`` steps and at the end) and the final held-out accuracy."""
    task = TASKS[args.task]
    torch.manual_seed(args.seed)
    device = torch.device(args.device)
    model = build_model(task, args).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, warmup_then_linear_decay(args.warmup_steps, args.steps))
    train_rng, eval_batches = random.Random(args.seed), held_out_batches(task, args)
    losses, evaluations, start = [], [], time.perf_counter()
    for step in range(1, args.steps + 1):
        model.train()
        inputs, mask, targets = to_device(task.sample(args.batch_size, args, train_rng), device)
        outputs, aux_loss = model(inputs, mask)
        loss = task.loss(outputs, targets)
        optimizer.zero_grad(set_to_none=True)
        (loss if aux_loss is None else loss + aux_loss).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        losses.append(loss.item())
        if step % args.log_every == 0 or step == args.steps:
            window = losses[-args.log_every:]
            print(f"step {step:6d}  train loss {sum(window) / len(window):.4f}  ({time.perf_counter() - start:.0f} s)",
                  flush=True)
        if (args.eval_every and step % args.eval_every == 0) or step == args.steps:
            evaluations.append({"step": step, **evaluate(model, task, eval_batches, device)})
            print(f"step {step:6d}  held-out accuracy {evaluations[-1]['accuracy']:.4f}  "
                  f"loss {evaluations[-1]['loss']:.4f}", flush=True)
    settings = {key: value for key, value in vars(args).items() if key not in ("module", "command")}
    return {"settings": settings, "criterion": task.criterion, "train_losses": losses, "evaluations": evaluations,
            "accuracy": evaluations[-1]["accuracy"], "seconds": time.perf_counter() - start,
            "parameters": sum(p.numel() for p in model.parameters())}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("task", choices=list(TASKS))
    parser.add_argument("--length", type=int, default=256,
                        help="sequence length N (ListOps: the longest expression, padded per batch)")
    parser.add_argument("--attention", default="psf", choices=list_attentions())
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
    parser.add_argument("--norm_style", choices=list(NORM_STYLES), default="pre",
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


def run(args) -> int:
    if args.metrics_file:
        check_output_file("metrics_file", args.metrics_file)  # before training, which may take hours
    if args.threads:
        torch.set_num_threads(args.threads)
    result = train_task(args)
    print(f"{args.task} N={args.length} {args.attention}: held-out accuracy {result['accuracy']:.4f} "
          f"({result['criterion']}, {args.eval_size} samples) after {args.steps} steps, {result['seconds']:.0f} s, "
          f"{result['parameters']:,} parameters")
    if args.metrics_file:
        write_file_into_place(args.metrics_file, json.dumps(result, indent=1))
    return 0
