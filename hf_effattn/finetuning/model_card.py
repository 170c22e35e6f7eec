"""Deprecated: the model card is :mod:`hf_effattn.model_cards` (``card.py``), where conversion can use it too."""

from ..deprecation import warn_moved
from ..model_cards.card import (  # noqa: F401
    IMAGE_CLASSIFICATION, TEMPLATE_PATH, TEXT_CLASSIFICATION, CardContent, CardKind, License, card_data,
    card_license, card_writer, converted_kind, render_model_card, source_license, write_model_card,
)

warn_moved("hf_effattn.finetuning.model_card", "hf_effattn.model_cards")
