"""The model code of hf_effattn: one flat folder, so that ``save_pretrained`` can copy it as remote code.

Files here import each other only as ``from .name import X`` and import nothing but torch and
transformers. The folder sits at the top of the repository and is installed as ``hf_effattn.modeling``
(``package_dir`` in ``setup.cfg``); saved checkpoints carry flat copies of its files, which never run
this ``__init__``.
"""

if __name__ != "hf_effattn.modeling":
    # Imported as a top-level ``modeling`` (from the repository root), every class would exist twice, and
    # the attention registry would see two different classes under each name.
    raise ImportError(
        f"This folder is the subpackage hf_effattn.modeling, imported here as {__name__!r}: "
        "import hf_effattn.modeling instead (install the package with `pip install -e .`)."
    )
