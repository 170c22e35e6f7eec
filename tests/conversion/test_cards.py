"""The card of a converted folder says what the folder is: named after its folder when the source is a local folder
whose Hub id is unknown (and the conversion says so in one line), tagged with the source's architecture, and, for
aligned blocks, what reads exactly as the checkpoint read (the chunked reader) and what is new (the memory, its gates'
start), never that the ``local`` attention is untrained."""

from __future__ import annotations

import logging

import pytest
from huggingface_hub import ModelCard
from transformers import BertModel, RobertaModel

from hf_effattn.conversion import convert
from hf_effattn.model_cards import source_architecture
from helpers.models import save_source

BERT_LENGTH = 20  # the tiny BERT checkpoint's own length (helpers.models.TEXT), the blocks here
NOTE = ("is a local folder whose Hub id is unknown (its card declares no base_model): the model card names it by its "
        "folder and links no source; give the Hub id with --base_model ID (Python: base_model=) to link it.")


def converted_card(tmp_path, attention_type: str, caplog, **options) -> ModelCard:
    """A tiny BERT checkpoint (a local folder with no card) converted with ``attention_type`` and blocks of its own
    length at four times it into ``tmp_path / "long-bert"``: its card; the conversion's log in ``caplog``."""
    save_source(BertModel, "bert", tmp_path / "model")
    with caplog.at_level(logging.WARNING, logger="hf_effattn"):
        convert(str(tmp_path / "model"), attention_type, tmp_path / "long-bert", local_block=BERT_LENGTH,
                max_length=4 * BERT_LENGTH, **options)
    return ModelCard.load(tmp_path / "long-bert" / "README.md")


def notes(caplog) -> list[str]:
    return [record.getMessage() for record in caplog.records if NOTE in record.getMessage()]


def test_the_chunked_reader_is_named_after_its_folder_tagged_bert_and_exact(tmp_path, caplog):
    card = converted_card(tmp_path, "local", caplog)
    assert card.data.tags == ["hf_effattn", "efficient-attention", "local", "bert", "custom_code"]
    assert card.data.model_name == "long-bert" and card.data.base_model is None
    assert "This model, `long-bert`, is the local checkpoint `model` with its self-attention replaced" in card.text
    assert (f"converted and not fine-tuned, with no new parameters: its blocks of {BERT_LENGTH} tokens, the "
            f"checkpoint's own length, are read exactly as the checkpoint reads an input of {BERT_LENGTH} tokens, as "
            "its chunked reader reads them") in " ".join(card.text.split())
    assert "untrained" not in card.text and "fine-tune it before use" not in card.text
    assert notes(caplog) == [f"{tmp_path / 'model'} {NOTE}"]  # once


def test_a_block_hybrids_card_says_what_is_exact_and_what_is_new_with_the_gates_start(tmp_path, caplog):
    card = " ".join(converted_card(tmp_path, "dba", caplog, attention_config={"initial_mechanism_weight": 0.01}).text
                    .split())
    assert (f"its blocks of {BERT_LENGTH} tokens, the checkpoint's own length, are read exactly as the checkpoint "
            "reads") in card
    assert ("New and untrained is the `dba` memory across the blocks, which each head's gate mixes in, starting at "
            "0.01 (below), so that the model starts near its blocks alone.") in card
    assert ("its new parameters are untrained, mixed in by gates starting at 0.01, so that the model starts near its "
            "blocks alone: train it by masked-LM continued pretraining on long texts (`finetune/run_mlm.py`)") in card
    assert "fine-tune the model before relying on its outputs" not in card


def test_with_a_hub_id_the_card_links_it_and_the_conversion_says_nothing(tmp_path, caplog):
    card = converted_card(tmp_path, "local", caplog, base_model="someone/tiny-bert")
    assert card.data.base_model == "someone/tiny-bert" and notes(caplog) == []
    assert "This model is [someone/tiny-bert](https://huggingface.co/someone/tiny-bert) with its" in card.text


def test_a_roberta_source_is_tagged_roberta_and_ours_by_the_positions_they_keep(tmp_path, caplog):
    save_source(RobertaModel, "roberta", tmp_path / "source")
    convert(str(tmp_path / "source"), "kerformer", tmp_path / "out")
    card = ModelCard.load(tmp_path / "out" / "README.md")
    assert "roberta" in card.data.tags and "bert" not in card.data.tags
    assert "its new parameters are untrained: fine-tune the model before relying on its outputs" in card.text
    assert source_architecture({"model_type": "effattn_roberta", "roberta_positions": False}) == "bert"
    assert source_architecture({"model_type": "effattn_roberta"}) == "roberta"
    assert source_architecture({"model_type": "effattn_vit"}) == source_architecture({"model_type": "vit"}) == "vit"


@pytest.mark.parametrize("weights, expected", [([[0.1, 0.1], [0.1, 0.1]], "at 0.1"),
                                               ([[0.01, 0.1], [0.1]], "between 0.01 and 0.1")])
def test_the_gates_start_is_one_value_or_its_range(weights, expected):
    from hf_effattn.model_cards.converted_attention import gates_start

    assert gates_start(weights) == expected
