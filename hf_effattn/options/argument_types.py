"""The ``argparse`` types that the command-line tools (``hf-effattn`` and the ``finetune/`` scripts) share: counts,
percentages, probabilities, shares, learning rates and weights, Hub ids, each refusing a bad value with a message
that says what was expected, before anything loads."""

from __future__ import annotations

import argparse
import math

from ..folders.hub_or_local import check_hub_id


def bounded_int(minimum: int):
    """An ``argparse`` type: an integer of at least ``minimum``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < minimum:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {text!r}")
        return value

    return parse


positive_int = bounded_int(1)
non_negative_int = bounded_int(0)


def number_in(low: float, high: float, what: str, low_included: bool = False, high_included: bool = False):
    """An ``argparse`` type: a finite number between ``low`` and ``high`` (each bound included or not), named
    ``what`` in its error."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        above = low <= value if low_included else low < value
        below = value <= high if high_included else value < high
        if not (math.isfinite(value) and above and below):
            bounds = f"{'[' if low_included else '('}{low:g}, {high:g}{']' if high_included else ')'}"
            raise argparse.ArgumentTypeError(f"expected {what} in {bounds}, got {text!r}")
        return value

    return parse


def open_interval(low: float, high: float, what: str):
    """An ``argparse`` type: a number strictly between ``low`` and ``high``, named ``what`` in its error."""
    return number_in(low, high, what)


# AdamW's first step moves a weight by the learning rate over 1 - beta1 = 0.1, a float32 (at most 3.4e38): a larger
# learning rate cannot take one step.
MAX_LEARNING_RATE = 3.4028234663852886e38 / 10

percentage = open_interval(0, 100, "a percentage")
probability = open_interval(0, 1, "a probability")
share = number_in(0, 1, "a share (0 for none)", low_included=True)  # of steps switched, of inputs dropped
learning_rate = number_in(0, MAX_LEARNING_RATE, "a learning rate", high_included=True)
non_negative_float = number_in(0, math.inf, "a number", low_included=True)


def hub_id(text: str) -> str:
    """An ``argparse`` type: a Hub model id (:func:`~hf_effattn.folders.hub_or_local.check_hub_id`)."""
    try:
        check_hub_id(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return text
