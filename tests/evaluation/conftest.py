"""The evaluator's tests' fixtures: a tiny RoBERTa masked-LM checkpoint over a word vocabulary that reads 8 tokens,
and a file of documents of its words (what else they share: ``helpers/evaluation.py``)."""

from __future__ import annotations

import json

import pytest
import torch
from helpers.evaluation import BLOCK, WORDS, random_documents
from helpers.finetuning import one_torch_thread  # noqa: F401 (autouse: one torch thread)

from hf_effattn.finetuning.synthetic import build_word_tokenizer, save_random_roberta


@pytest.fixture(scope="session")
def checkpoint(tmp_path_factory) -> str:
    """A plain RoBERTa masked-LM checkpoint (random weights, no dropout) with its word tokenizer."""
    tokenizer = build_word_tokenizer(WORDS, BLOCK)
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("tiny-roberta")
    return str(save_random_roberta(folder, tokenizer, hidden_size=32, dropout=0.0))


@pytest.fixture()
def documents_file(tmp_path):
    """A JSONL file of five documents of 40 words."""
    path = tmp_path / "documents.jsonl"
    path.write_text("".join(json.dumps({"text": text}) + "\n" for text in random_documents(5, 40)))
    return path
