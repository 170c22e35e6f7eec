"""What a load that extends a checkpoint's input size (``from_pretrained(..., max_length=N)`` or ``image_size=S``,
``pretrained.py``) checks before any weight is read: that the extended model fits in the machine's memory.
"""

from __future__ import annotations

import os

import torch


def check_fits_in_memory(cls, target, saved) -> None:
    """Raise ``ValueError`` when a model extended to the input size of ``target`` (from ``saved``'s) would need
    more memory for its parameters alone (``cls`` built on the meta device: nothing allocated) than the machine has."""
    if target.input_size == saved.input_size or not hasattr(os, "sysconf"):
        return
    with torch.device("meta"):
        model = cls(target)
    needed = sum(tensor.numel() * tensor.element_size() for tensor in (*model.parameters(), *model.buffers()))
    memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    if needed > memory:
        raise ValueError(
            f"{target.size_argument}={target.input_size} gives a model whose parameters alone take {needed / 1e9:,.1f} "
            f"GB (estimated from its config), more than this machine's {memory / 1e9:,.1f} GB of memory: choose a "
            f"smaller {target.size_argument}.")
