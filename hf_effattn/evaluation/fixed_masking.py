"""The evaluation's masking: BERT's (15 % of the tokens are targets; of those, 80 % become the mask token, 10 % a
random token, 10 % stay), drawn once per document from the seed and the document's index alone, so that every
model read with the same tokenizer is scored on the same masked tokens."""

from __future__ import annotations

import random

import torch

IGNORED = -100  # the label of a token that is not a target
MASKED_SHARE, REPLACED_BY_MASK, REPLACED_BY_RANDOM = 0.15, 0.8, 0.1


def document_generator(seed: int, index: int) -> torch.Generator:
    """A generator that depends on ``seed`` and the document's ``index`` alone."""
    return torch.Generator().manual_seed(random.Random(f"{seed}-{index}").getrandbits(63))


def mask_document(ids: torch.Tensor, mask_token_id: int, vocab_size: int, seed: int,
                  index: int) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's masking of a document's content ids ``[L]`` (no special tokens): ``(inputs [L], labels [L])``, the
    labels the original ids at the targets and :data:`IGNORED` elsewhere."""
    generator = document_generator(seed, index)
    chosen = torch.rand(ids.shape, generator=generator) < MASKED_SHARE
    draw = torch.rand(ids.shape, generator=generator)
    random_ids = torch.randint(vocab_size, ids.shape, generator=generator)
    inputs = torch.where(chosen & (draw < REPLACED_BY_MASK), mask_token_id, ids)
    inputs = torch.where(chosen & (draw >= REPLACED_BY_MASK) & (draw < REPLACED_BY_MASK + REPLACED_BY_RANDOM),
                         random_ids, inputs)
    return inputs, torch.where(chosen, ids, IGNORED)
