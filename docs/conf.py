"""Sphinx configuration of the hf_effattn documentation site.

The pages are Markdown (MyST-Parser), the theme is furo, the command-line reference is generated from the real
parsers (sphinx-argparse) and the Python reference from the docstrings (autodoc with napoleon, Google style).
Build it strictly, every warning an error, as the test suite does::

    python -m sphinx -W --keep-going -b html docs docs/_build/html
"""

import hf_effattn

project = "hf_effattn"
author = "hf_effattn authors"
copyright = "hf_effattn authors"
release = version = hf_effattn.__version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinxarg.ext",
]

source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]

# MyST: headings get anchors for links such as [Inputs](models.md#inputs), down to the third level.
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence", "deflist"]

# autodoc: members in source order, signatures with their type hints in the description.
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "show-inheritance": True}
napoleon_google_docstring = True
napoleon_numpy_docstring = False

html_theme = "furo"
html_title = f"hf_effattn {release}"
# A method we override without a docstring of its own shows none, rather than Transformers' (written for its docs).
autodoc_inherit_docstrings = False
