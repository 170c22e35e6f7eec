"""Deprecated: the inputs of an attention transfer are :mod:`hf_effattn.conversion.transfer.data`."""

from ..deprecation import warn_moved
from .transfer.data import (  # noqa: F401
    COLUMNS, EXAMPLES, FILE_BUILDERS, IMAGE_COLUMNS, SOURCES, TEXT_COLUMNS, load_rows, pick_column, transfer_loader,
    usable_examples,
)

warn_moved("hf_effattn.conversion.transfer_data", "hf_effattn.conversion.transfer.data")
