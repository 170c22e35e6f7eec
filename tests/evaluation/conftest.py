"""What the evaluator's tests share: a tiny RoBERTa masked-LM checkpoint over a word vocabulary that reads 8 tokens,
documents of its words, and the models of this package built from it, extended to 32 tokens."""

from __future__ import annotations

import json
import random

import pytest
import torch
from helpers.finetuning import one_torch_thread  # noqa: F401 (autouse: one torch thread)

from hf_effattn import EffAttnRobertaForMaskedLM
from hf_effattn.finetuning.synthetic import build_word_tokenizer, filler_words, save_random_roberta

BLOCK = 8  # the tiny checkpoint's longest input, and the block models' blocks (6 words of text each)
LENGTH = 32  # the block models' longest input
WORDS = filler_words(40)  # few words: many recur in other chunks, and so are long-context words
PASSAGE = 4


@pytest.fixture(scope="session")
def checkpoint(tmp_path_factory) -> str:
    """A plain RoBERTa masked-LM checkpoint (random weights, no dropout) with its word tokenizer."""
    tokenizer = build_word_tokenizer(WORDS, BLOCK)
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("tiny-roberta")
    return str(save_random_roberta(folder, tokenizer, hidden_size=32, dropout=0.0))


def random_documents(count: int, words: int, seed: int = 0) -> list[str]:
    generator = random.Random(seed)
    return [" ".join(generator.choice(WORDS) for _ in range(words)) for _ in range(count)]


@pytest.fixture()
def documents_file(tmp_path):
    """A JSONL file of five documents of 40 words."""
    path = tmp_path / "documents.jsonl"
    path.write_text("".join(json.dumps({"text": text}) + "\n" for text in random_documents(5, 40)))
    return path


def block_model(checkpoint: str, attention_type: str = "local", **settings) -> EffAttnRobertaForMaskedLM:
    """The checkpoint extended to :data:`LENGTH` tokens, read in aligned blocks of its own length, :data:`BLOCK`
    (with ``attention_type`` as their memory, unless ``local``)."""
    torch.manual_seed(0)  # the memory's new weights
    return EffAttnRobertaForMaskedLM.from_pretrained(
        checkpoint, attention_type=attention_type, attention_config={"local_block": BLOCK, **settings},
        max_length=LENGTH).eval()
