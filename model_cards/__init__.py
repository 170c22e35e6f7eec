"""The model card templates (Jinja, rendered by ``huggingface_hub.ModelCard``), shipped as package data.

The folder sits at the top of the repository and is installed as ``hf_effattn.model_cards``.
"""

if __name__ != "hf_effattn.model_cards":
    raise ImportError(
        f"This folder is the subpackage hf_effattn.model_cards, imported here as {__name__!r}: "
        "import hf_effattn.model_cards instead (install the package with `pip install -e .`)."
    )
