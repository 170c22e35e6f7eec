"""Generators of the PSF paper's synthetic long-range tasks (Khalitov et al., Sec. 5.2) and of LRA ListOps.

Every generator draws from a ``random.Random`` it is given, so that a seed fixes the data.

* Adding problem: ``N`` pairs ``(a_i, b_i)``, ``a_i ~ U(-1, 1)``, ``b_i = 1`` at two distinct positions ``t1``,
  ``t2`` drawn anywhere (not restricted to the halves, as the paper does) and 0 elsewhere; target
  ``0.5 + (a_t1 + a_t2) / 4``; a prediction is correct if ``|y - y_hat| < 0.04``.
* Temporal order: ``N`` symbols, noise from ``{a, b, c, d}`` except at two distinct positions holding ``X`` or
  ``Y``; four classes by the ordered pair: ``(X, X) = 0, (X, Y) = 1, (Y, X) = 2, (Y, Y) = 3`` (the paper
  numbers them 1-4).
* ListOps (Nangia & Bowman 2018, enlarged by LRA, Tay et al. 2020): nested lists ``[OP a b ... ]`` with
  operators MAX, MIN, MED (median, rounded down) and SM (sum mod 10) over digits 0-9; the label is the value
  of the expression. As LRA generates it: a node below the maximum depth is an operator with probability
  0.25 and has 2 to ``max_args`` arguments, otherwise a digit; whole expressions are drawn until their
  token count lies in ``[min_length, max_length]``. Tokens: the operators with their opening bracket
  (``[MAX``), the digits and ``]``, no parentheses.
"""

from __future__ import annotations

import random
from typing import NamedTuple

import torch

TEMPORAL_ORDER_SYMBOLS = ("a", "b", "c", "d", "X", "Y")
NOISE_SYMBOLS = 4  # a, b, c, d come first
TEMPORAL_ORDER_CLASSES = ("XX", "XY", "YX", "YY")

LISTOPS_OPERATORS = ("[MIN", "[MAX", "[MED", "[SM")
LISTOPS_CLOSE = "]"
LISTOPS_PAD = "<pad>"
LISTOPS_VOCAB = (LISTOPS_PAD,) + tuple(str(d) for d in range(10)) + LISTOPS_OPERATORS + (LISTOPS_CLOSE,)
LISTOPS_TOKEN_IDS = {token: i for i, token in enumerate(LISTOPS_VOCAB)}
OPERATOR_PROBABILITY = 0.25  # LRA's VALUE_P: a node is a digit with probability 0.75


def torch_generator(rng: random.Random) -> torch.Generator:
    """A ``torch.Generator`` seeded from ``rng`` (so that one seed drives both)."""
    return torch.Generator().manual_seed(rng.getrandbits(63))


def two_distinct_positions(num_samples: int, length: int, generator: torch.Generator) -> torch.Tensor:
    """``[n, 2]`` positions ``t1 != t2``, uniform over all ordered pairs in ``[0, length)``."""
    first = torch.randint(length, (num_samples,), generator=generator)
    second = (first + torch.randint(1, length, (num_samples,), generator=generator)) % length
    return torch.stack([first, second], dim=1)


def adding_problem(num_samples: int, length: int, rng: random.Random) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs ``[n, N, 2]`` (value, marker) and targets ``[n]`` ``0.5 + (a_t1 + a_t2) / 4``."""
    generator = torch_generator(rng)
    values = torch.rand(num_samples, length, generator=generator) * 2 - 1
    positions = two_distinct_positions(num_samples, length, generator)
    markers = torch.zeros(num_samples, length).scatter_(1, positions, 1.0)
    targets = 0.5 + values.gather(1, positions).sum(1) / 4
    return torch.stack([values, markers], dim=-1), targets


def temporal_order(num_samples: int, length: int, rng: random.Random) -> tuple[torch.Tensor, torch.Tensor]:
    """Token ids ``[n, N]`` into :data:`TEMPORAL_ORDER_SYMBOLS` and class labels ``[n]`` in 0..3."""
    generator = torch_generator(rng)
    tokens = torch.randint(NOISE_SYMBOLS, (num_samples, length), generator=generator)
    positions = two_distinct_positions(num_samples, length, generator).sort(dim=1).values
    signals = torch.randint(2, (num_samples, 2), generator=generator)  # 0 = X, 1 = Y, in order of position
    tokens.scatter_(1, positions, NOISE_SYMBOLS + signals)
    return tokens, 2 * signals[:, 0] + signals[:, 1]


def apply_operator(operator: str, arguments: list[int]) -> int:
    """The value of ``[OP arguments ]``: MIN, MAX, MED (median rounded down), SM (sum mod 10)."""
    if operator == "[MIN":
        return min(arguments)
    if operator == "[MAX":
        return max(arguments)
    if operator == "[SM":
        return sum(arguments) % 10
    ordered = sorted(arguments)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) // 2


class ExpressionTooLong(Exception):
    """Raised while drawing an expression once it exceeds the token budget (it would be rejected anyway)."""


def listops_expression(rng: random.Random, tokens: list[str], max_tokens: int, max_depth: int, max_args: int,
                       depth: int = 1) -> int:
    """Append one random expression's tokens to ``tokens`` and return its value; nodes at ``max_depth`` are
    digits. Raises :class:`ExpressionTooLong` as soon as ``tokens`` holds more than ``max_tokens``."""
    if len(tokens) >= max_tokens:
        raise ExpressionTooLong
    if depth >= max_depth or rng.random() >= OPERATOR_PROBABILITY:
        digit = rng.randrange(10)
        tokens.append(str(digit))
        return digit
    operator = rng.choice(LISTOPS_OPERATORS)
    tokens.append(operator)
    arguments = [listops_expression(rng, tokens, max_tokens, max_depth, max_args, depth + 1)
                 for _ in range(rng.randint(2, max_args))]
    tokens.append(LISTOPS_CLOSE)
    return apply_operator(operator, arguments)


class ListOpsSample(NamedTuple):
    tokens: list[str]
    label: int


def listops(num_samples: int, rng: random.Random, *, max_length: int = 2000, min_length: int = 500,
            max_depth: int = 10, max_args: int = 10) -> list[ListOpsSample]:
    """``num_samples`` expressions whose token counts lie in ``[min_length, max_length]`` (LRA: 500-2000),
    drawn until they fit (longer ones are abandoned as soon as they overflow)."""
    if not 1 <= min_length <= max_length:
        raise ValueError(f"ListOps needs 1 <= min_length <= max_length, got {min_length} and {max_length}.")
    samples = []
    while len(samples) < num_samples:
        tokens: list[str] = []
        try:
            value = listops_expression(rng, tokens, max_length, max_depth, max_args)
        except ExpressionTooLong:
            continue
        if min_length <= len(tokens) <= max_length:
            samples.append(ListOpsSample(tokens, value))
    return samples


def encode_listops(samples: list[ListOpsSample], length: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Token ids ``[n, length]`` (right-padded with ``<pad>`` = 0), padding mask ``[n, length]`` (True = real)
    and labels ``[n]``."""
    ids = torch.zeros(len(samples), length, dtype=torch.long)
    for row, sample in enumerate(samples):
        ids[row, : len(sample.tokens)] = torch.tensor([LISTOPS_TOKEN_IDS[token] for token in sample.tokens])
    labels = torch.tensor([sample.label for sample in samples])
    return ids, ids != LISTOPS_TOKEN_IDS[LISTOPS_PAD], labels
