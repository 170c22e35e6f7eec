"""The ``argparse`` types that the command-line tools (``hf-effattn`` and the ``finetune/`` scripts) share: counts,
percentages and probabilities, Hub ids, each refusing a bad value with a message that says what was expected."""

from __future__ import annotations

import argparse

from .hub_or_local import check_hub_id


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


def open_interval(low: float, high: float, what: str):
    """An ``argparse`` type: a number strictly between ``low`` and ``high``, named ``what`` in its error."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = None
        if value is None or not low < value < high:
            raise argparse.ArgumentTypeError(f"expected {what} between {low:g} and {high:g} (exclusive), got {text!r}")
        return value

    return parse


percentage = open_interval(0, 100, "a percentage")
probability = open_interval(0, 1, "a probability")


def hub_id(text: str) -> str:
    """An ``argparse`` type: a Hub model id (:func:`~hf_effattn.hub_or_local.check_hub_id`)."""
    try:
        check_hub_id(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return text
