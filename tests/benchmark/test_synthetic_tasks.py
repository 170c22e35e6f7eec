"""The synthetic tasks: generators checked against independent computations of their targets, their bounds and
their determinism, and a tiny ``train-task`` run whose loss falls."""

from __future__ import annotations

import argparse
import json
import random
import statistics

import pytest
import torch
from helpers.threads import restore_torch_threads  # noqa: F401 (an autouse fixture)

from hf_effattn.commands import train_task as train_task_command
from hf_effattn.synthetic_tasks import adding_problem, encode_listops, listops, temporal_order, training
from hf_effattn.synthetic_tasks.generators import LISTOPS_OPERATORS, LISTOPS_VOCAB, TEMPORAL_ORDER_SYMBOLS


def test_adding_problem_targets_markers_and_values():
    inputs, targets = adding_problem(200, 50, random.Random(0))
    assert inputs.shape == (200, 50, 2) and targets.shape == (200,)
    values, markers = inputs[..., 0], inputs[..., 1]
    assert values.min() >= -1 and values.max() < 1
    assert set(markers.unique().tolist()) == {0.0, 1.0}
    for row in range(200):
        marked = [i for i in range(50) if markers[row, i] == 1]
        assert len(marked) == 2
        expected = 0.5 + (values[row, marked[0]].item() + values[row, marked[1]].item()) / 4
        assert targets[row].item() == pytest.approx(expected, abs=1e-6)


def test_adding_problem_marks_positions_anywhere():
    """Not restricted to one mark per half (as Hochreiter & Schmidhuber did): near and far pairs both occur."""
    inputs, _ = adding_problem(500, 64, random.Random(1))
    gaps = [int(torch.diff(torch.nonzero(row[:, 1]).flatten()).item()) for row in inputs]
    assert min(gaps) < 8 and max(gaps) > 56
    first_marks = [int(torch.nonzero(row[:, 1])[0].item()) for row in inputs]
    assert max(first_marks) >= 32  # both marks in the second half happens


def test_temporal_order_classes_follow_the_ordered_signal_pair():
    tokens, labels = temporal_order(300, 40, random.Random(0))
    assert tokens.shape == (300, 40) and tokens.min() >= 0 and tokens.max() < len(TEMPORAL_ORDER_SYMBOLS)
    class_of_pair = {("X", "X"): 0, ("X", "Y"): 1, ("Y", "X"): 2, ("Y", "Y"): 3}
    for row in range(300):
        symbols = [TEMPORAL_ORDER_SYMBOLS[t] for t in tokens[row].tolist()]
        signals = tuple(s for s in symbols if s in "XY")
        assert len(signals) == 2
        assert labels[row].item() == class_of_pair[signals]
    assert set(labels.tolist()) == {0, 1, 2, 3}


def evaluate_listops(tokens: list[str]) -> int:
    """An independent recursive-descent evaluator of a ListOps token sequence."""
    def expression(i: int) -> tuple[int, int]:
        token = tokens[i]
        if token.isdigit():
            return int(token), i + 1
        arguments, i = [], i + 1
        while tokens[i] != "]":
            value, i = expression(i)
            arguments.append(value)
        operations = {"[MIN": min, "[MAX": max, "[SM": lambda xs: sum(xs) % 10,
                      "[MED": lambda xs: int(statistics.median(xs))}
        return operations[token](arguments), i + 1

    value, end = expression(0)
    assert end == len(tokens)
    return value


def nesting_and_arity(tokens: list[str]) -> tuple[int, int, int]:
    """Deepest bracket nesting, and the fewest and most arguments of an operator."""
    depth = deepest = 0
    counts, arities = [], []
    for token in tokens:
        if counts:
            counts[-1] += token != "]"
        if token in LISTOPS_OPERATORS:
            depth += 1
            deepest = max(deepest, depth)
            counts.append(0)
        elif token == "]":
            depth -= 1
            arities.append(counts.pop())
    return deepest, min(arities), max(arities)


def test_listops_labels_lengths_depth_and_tokens():
    samples = listops(150, random.Random(0), max_length=300, min_length=60, max_depth=6, max_args=5)
    for tokens, label in samples:
        assert 60 <= len(tokens) <= 300
        assert set(tokens) <= set(LISTOPS_VOCAB) and not {"(", ")"} & set(tokens)
        assert label == evaluate_listops(tokens)
        deepest, fewest, most = nesting_and_arity(tokens)
        assert deepest <= 5 and 2 <= fewest and most <= 5  # operators below depth 6; leaves at most at 6
    assert {token for tokens, _ in samples for token in tokens} >= set(LISTOPS_OPERATORS)
    assert len({label for _, label in samples}) == 10


def test_listops_default_bounds_are_lra_sizes():
    samples = listops(5, random.Random(3))
    assert all(500 <= len(tokens) <= 2000 and evaluate_listops(tokens) == label for tokens, label in samples)


def test_encode_listops_pads_right_and_keeps_labels():
    samples = listops(4, random.Random(0), max_length=40, min_length=5)
    ids, mask, labels = encode_listops(samples, 40)
    assert ids.shape == mask.shape == (4, 40)
    for row, (tokens, label) in enumerate(samples):
        assert [LISTOPS_VOCAB[i] for i in ids[row, : len(tokens)].tolist()] == tokens
        assert mask[row].sum() == len(tokens) and not ids[row, len(tokens):].any()
        assert labels[row] == label


@pytest.mark.parametrize("generate", [
    lambda rng: adding_problem(8, 32, rng),
    lambda rng: temporal_order(8, 32, rng),
    lambda rng: encode_listops(listops(8, rng, max_length=64, min_length=10), 64),
])
def test_generators_are_deterministic_under_a_seed(generate):
    first, again, other = generate(random.Random(5)), generate(random.Random(5)), generate(random.Random(6))
    assert all(torch.equal(a, b) for a, b in zip(first, again))
    assert not all(torch.equal(a, b) for a, b in zip(first, other))


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    train_task_command.add_arguments(parser)
    return parser.parse_args(argv)


@pytest.mark.parametrize("attention", ["psf", "kerformer", "sdpa", "nystromformer", "linformer"])
def test_tiny_adding_run_lowers_the_loss_and_writes_metrics(attention, tmp_path):
    metrics_file = tmp_path / "metrics.json"
    args = parse(["adding", "--length", "16", "--attention", attention, "--steps", "60", "--batch_size", "16",
                  "--hidden_size", "16", "--num_heads", "2", "--layers", "1", "--eval_size", "32",
                  "--warmup_steps", "5", "--log_every", "1000", "--threads", "1", "--metrics_file", str(metrics_file)])
    assert train_task_command.run(args) == 0
    result = json.loads(metrics_file.read_text())
    losses = result["train_losses"]
    assert len(losses) == 60 and 0 <= result["accuracy"] <= 1
    assert statistics.fmean(losses[-10:]) < 0.5 * statistics.fmean(losses[:5])


@pytest.mark.parametrize("task", ["temporal-order", "listops"])
def test_classification_tasks_train_and_evaluate(task):
    args = parse([task, "--length", "32", "--attention", "singularformer", "--steps", "3", "--batch_size", "4",
                  "--hidden_size", "16", "--num_heads", "2", "--layers", "1", "--eval_size", "6",
                  "--min_length", "5", "--max_depth", "4", "--pooling", "first", "--norm_style", "post"])
    result = training.train_task(args)
    assert len(result["train_losses"]) == 3 and all(loss > 0 for loss in result["train_losses"])
    assert 0 <= result["accuracy"] <= 1 and result["evaluations"][-1]["step"] == 3
