"""The two readers an evaluation compares, each a way for the same weights to read a document's content ids:

``model``
    the model as it is, the whole document (up to ``max_length``) as one input: framed by ``[CLS]`` and ``[SEP]``
    at every aligned block for a model with ``local_block`` (``hf_effattn.block_tokens``), at its two ends otherwise;
``chunks``
    the chunked reader of the same checkpoint: the same content ids cut into chunks of ``chunk_length - 2``, each
    framed and read as an input of its own; a model with a memory beside aligned blocks reads them with its blocks
    alone (the gate closed), so that for such a model the chunks are its checkpoint as it was converted.

Both give the last hidden state at every content position, in order, so that both are scored on the same tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..block_tokens import framed_blocks
from ..models.hybrid_parts import has_hybrid_layers, only_part
from .masked_lm_model import model_block


@dataclass(frozen=True)
class Reader:
    """A way to read content ids: framed every ``frame`` tokens (None: once, around them all), the framed sequence
    read ``whole`` or each frame as an input of its own, with the hybrid layers' ``part`` alone (None: both)."""

    name: str
    frame: int | None
    whole: bool
    part: str | None = None

    def hidden_states(self, model, ids: torch.Tensor, cls: int, sep: int) -> torch.Tensor:
        """The last hidden state at each content id ``ids`` ``[L]``: ``[L, C]``."""
        frame = self.frame or len(ids) + 2
        framed = torch.tensor(framed_blocks(ids.tolist(), frame, cls, sep), device=model.device)
        content = torch.tensor(framed_blocks([1] * len(ids), frame, 0, 0), device=model.device).bool()
        pieces = [framed] if self.whole else list(framed.split(frame))
        with only_part(model, self.part):
            hidden = torch.cat([encoded(model, group) for group in same_length_groups(pieces)])
        return hidden[content]


def same_length_groups(pieces: list[torch.Tensor]) -> list[torch.Tensor]:
    """Consecutive pieces of token ids batched while they have one length (all chunks but the last, then the last):
    each ``[B, N]``, no padding."""
    groups = [[pieces[0]]]
    for piece in pieces[1:]:
        if len(piece) == len(groups[-1][-1]):
            groups[-1].append(piece)
        else:
            groups.append([piece])
    return [torch.stack(group) for group in groups]


def encoded(model, input_ids: torch.Tensor) -> torch.Tensor:
    """The encoder's last hidden state of ``input_ids`` ``[B, N]``, the batch laid end to end: ``[B * N, C]``."""
    hidden = model.base_model(input_ids=input_ids).last_hidden_state
    return hidden.reshape(-1, hidden.shape[-1])


def readers_of(model, chunk_length: int) -> tuple[Reader, Reader]:
    """The ``model`` reader and the ``chunks`` reader of ``model`` (see the module docstring)."""
    block = model_block(model)
    closed = "window" if block is not None and has_hybrid_layers(model) else None
    return Reader("model", block, whole=True), Reader("chunks", chunk_length, whole=False, part=closed)
