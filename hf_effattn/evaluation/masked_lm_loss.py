"""The masked-LM loss of a reader: the cross-entropy, in nats, of the masked-LM head's prediction at each target
from the reader's last hidden state there."""

from __future__ import annotations

import torch

from .fixed_masking import IGNORED


def target_losses(model, hidden: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """The cross-entropy at each target, in order: ``hidden`` ``[L, C]`` (the reader's, at the content positions),
    ``labels`` ``[L]`` (:data:`IGNORED` where not a target) -> ``[M]`` float32 on the CPU. Only the targets' hidden
    states go through the head."""
    targets = labels != IGNORED
    logits = model.lm_head(hidden[targets.to(hidden.device)]).float()
    return torch.nn.functional.cross_entropy(logits, labels[targets].to(logits.device), reduction="none").cpu()
