"""Deprecated: the model card is :mod:`hf_effattn.model_cards` (``card.py``), where conversion can use it too."""

from ..deprecation import warn_moved
from ..model_cards.card import (  # noqa: F401
    IMAGE_CLASSIFICATION, TEMPLATE_PATH, TEXT_CLASSIFICATION, CardContent, CardKind, card_data, card_writer,
    converted_kind, render_model_card, write_model_card,
)
from ..model_cards.source_card import License, card_license, source_license  # noqa: F401

warn_moved("hf_effattn.finetuning.model_card", "hf_effattn.model_cards")
