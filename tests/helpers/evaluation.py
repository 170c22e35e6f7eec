"""What the evaluator's tests share (``tests/evaluation/``, with its fixtures in its ``conftest.py``): documents of a
small word vocabulary, and the models of this package built from a tiny RoBERTa checkpoint that reads 8 tokens,
extended to 32 tokens."""

from __future__ import annotations

import random

import torch

from hf_effattn import EffAttnRobertaForMaskedLM
from hf_effattn.finetuning.synthetic import filler_words

BLOCK = 8  # the tiny checkpoint's longest input, and the block models' blocks (6 words of text each)
LENGTH = 32  # the block models' longest input
WORDS = filler_words(40)  # few words: many recur in other chunks, and so are long-context words
PASSAGE = 4


def random_documents(count: int, words: int, seed: int = 0) -> list[str]:
    generator = random.Random(seed)
    return [" ".join(generator.choice(WORDS) for _ in range(words)) for _ in range(count)]


def block_model(checkpoint: str, attention_type: str = "local", **settings) -> EffAttnRobertaForMaskedLM:
    """The checkpoint extended to :data:`LENGTH` tokens, read in aligned blocks of its own length, :data:`BLOCK`
    (with ``attention_type`` as their memory, unless ``local``)."""
    torch.manual_seed(0)  # the memory's new weights
    return EffAttnRobertaForMaskedLM.from_pretrained(
        checkpoint, attention_type=attention_type, local_block=BLOCK, max_length=LENGTH, **settings).eval()
