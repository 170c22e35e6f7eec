"""The model card of a Hub-ready folder: its Jinja template (``template.md``, rendered by
``huggingface_hub.ModelCard``, shipped as package data) and the code that fills it in (:mod:`.card`, with what the
source checkpoint's card declares: :mod:`.source_card`; the sentence-embedding snippets: :mod:`.embedding_snippets`;
what a converted model's attention reads exactly, and the source's architecture: :mod:`.converted_attention`).

The folder sits at the top of the repository and is installed as ``hf_effattn.model_cards``.
"""

if __name__ != "hf_effattn.model_cards":
    raise ImportError(
        f"This folder is the subpackage hf_effattn.model_cards, imported here as {__name__!r}: "
        "import hf_effattn.model_cards instead (install the package with `pip install -e .`)."
    )

from .card import (  # noqa: E402 (after the check above)
    IMAGE_CLASSIFICATION, TEMPLATE_PATH, TEXT_CLASSIFICATION, CardContent, CardKind, card_writer, converted_kind,
    local_part_of, render_model_card, write_model_card,
)
from .converted_attention import source_architecture  # noqa: E402
from .source_card import License, card_base_model, card_license  # noqa: E402

__all__ = ["CardContent", "CardKind", "IMAGE_CLASSIFICATION", "License", "TEMPLATE_PATH", "TEXT_CLASSIFICATION",
           "card_base_model", "card_license", "card_writer", "converted_kind", "local_part_of", "render_model_card",
           "source_architecture", "write_model_card"]
