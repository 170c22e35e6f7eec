"""The masked tokens only long context can see.

A masked token (a target) is a *long-context word* when its exact word-piece appears in the input the readers see
(unmasked, or a kept or random replacement that happens to equal it) somewhere earlier in the document, in an earlier
chunk, and nowhere else in its own chunk (before or after it). A reader of independent chunks sees no copy of it; a
reader of the whole document can. Chunks are those of the chunked reader: ``chunk`` content ids each (its
``chunk_length - 2``), counted from the document's start.
"""

from __future__ import annotations

import torch

from .fixed_masking import IGNORED


def long_context_targets(inputs: torch.Tensor, labels: torch.Tensor, chunk: int) -> torch.Tensor:
    """For each target of one document's content (``inputs``, ``labels`` ``[L]``), in order: whether it is a
    long-context word (see the module docstring), ``[M]`` bool."""
    flags = []
    for position in (labels != IGNORED).nonzero().flatten().tolist():
        seen = inputs == labels[position]
        seen[position] = False
        start = position - position % chunk
        flags.append(bool(seen[:start].any()) and not bool(seen[start:start + chunk].any()))
    return torch.tensor(flags, dtype=torch.bool)
