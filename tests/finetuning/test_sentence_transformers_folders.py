"""A sentence-transformers checkpoint stays one through every training script: the folder that
``run_text_classification.py``, ``run_mlm.py`` (positions extended too) and the Trainer script write keeps its
``modules.json``, pooling and normalisation, with ``max_seq_length`` following an extension, and is carded as a
sentence-transformers model whose documented pipeline computes what ``SentenceTransformer`` does; a LoRA run, which
cannot carry them, says so in one line before it trains. (The real MiniLM through the whole long recipe:
``tests/conversion/test_convert_minilm.py``.)"""

from __future__ import annotations

import logging
import re

import pytest
import torch
from helpers.finetuning import one_torch_thread  # noqa: F401 (autouse: one torch thread)
from helpers.finetuning import MAX_LENGTH, WORK, glue_mirror, tiny_text_checkpoint
from helpers.red_team import mlm_argv, texts_file
from huggingface_hub import ModelCard

from hf_effattn.finetuning import masked_lm, text_classification, text_classification_trainer

SENTENCE_TRANSFORMERS_FILES = ("modules.json", "sentence_bert_config.json", "1_Pooling/config.json")


@pytest.fixture(scope="module")
def sentence_transformer() -> str:
    """The tiny RoBERTa as a sentence-transformers model: mean pooling, then normalisation, 24 tokens at most."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer

    folder = WORK / "tiny-sentence-transformer"
    if not folder.is_dir():
        modules = [Transformer(tiny_text_checkpoint(), max_seq_length=24), Pooling(32, "mean"), Normalize()]
        SentenceTransformer(modules=modules, device="cpu").save(str(folder))
    return str(folder)


def text_options(model: str, output_dir, **more) -> dict:
    return {"model_name_or_path": model, "task_name": "sst2", "dataset_name": glue_mirror(), "max_length": MAX_LENGTH,
            "attention_type": "dba", "output_dir": output_dir, "per_device_train_batch_size": 8, **more}


def card_pipeline_embeddings(folder, monkeypatch) -> torch.Tensor:
    """The embeddings that the "Sentence embeddings" section of ``folder``'s card computes with Transformers alone,
    run as printed from ``folder``'s parent (its code names the folder as the repository)."""
    card = (folder / "README.md").read_text()
    section = card.split("### Sentence embeddings")[1].split("\n## ")[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert len(blocks) == 2 and "SentenceTransformer(" in blocks[0] and "AutoModel" in blocks[1]
    monkeypatch.chdir(folder.parent)
    namespace = {}
    exec(blocks[1], namespace)
    return namespace["embeddings"]


def assert_sentence_transformer(folder, monkeypatch, max_seq_length: int) -> None:
    """``folder`` keeps the modules, loads as a sentence-transformers model whose embeddings are those of the
    card's pipeline, and is carded as one."""
    from sentence_transformers import SentenceTransformer

    for name in SENTENCE_TRANSFORMERS_FILES:
        assert (folder / name).is_file(), name
    encoder = SentenceTransformer(str(folder), trust_remote_code=True, device="cpu")
    assert [type(module).__name__ for module in encoder] == ["Transformer", "Pooling", "Normalize"]
    assert encoder.max_seq_length == max_seq_length
    expected = encoder.encode(["A first sentence.", "A second one."], convert_to_tensor=True)
    torch.testing.assert_close(card_pipeline_embeddings(folder, monkeypatch), expected, atol=1e-5, rtol=1e-5)
    card = ModelCard.load(folder / "README.md")
    assert card.data.library_name == "sentence-transformers" and "sentence-transformers" in card.data.tags


def test_a_fine_tuned_sentence_transformer_keeps_its_modules(sentence_transformer, tmp_path, monkeypatch):
    text_classification.train(**text_options(sentence_transformer, tmp_path / "classifier"), max_train_steps=2)
    assert_sentence_transformer(tmp_path / "classifier", monkeypatch, max_seq_length=24)
    assert ModelCard.load(tmp_path / "classifier" / "README.md").data.pipeline_tag == "text-classification"


def test_the_trainer_script_keeps_the_modules_too(sentence_transformer, tmp_path, monkeypatch):
    text_classification_trainer.train(**text_options(sentence_transformer, tmp_path / "trainer"), max_steps=2,
                                      save_strategy="no", report_to="none", use_cpu=True)
    assert_sentence_transformer(tmp_path / "trainer", monkeypatch, max_seq_length=24)


def test_masked_lm_pretraining_keeps_the_modules_at_its_extended_length(sentence_transformer, tmp_path, monkeypatch):
    train = texts_file(tmp_path / "data")
    masked_lm.main(mlm_argv(sentence_transformer, train, tmp_path / "long", "--new_mlm_head", "--max_length", "64",
                            max_train_steps=2, checkpointing_steps=None))
    assert_sentence_transformer(tmp_path / "long", monkeypatch, max_seq_length=64)
    assert ModelCard.load(tmp_path / "long" / "README.md").data.pipeline_tag == "fill-mask"


def test_a_lora_run_says_before_training_that_the_modules_are_not_carried(sentence_transformer, tmp_path, caplog):
    (tmp_path / "a-file").write_text("not a folder")
    with caplog.at_level(logging.WARNING), pytest.raises(ValueError, match="is a file, not a folder"):
        text_classification.train(**text_options(sentence_transformer, tmp_path / "a-file"), lora_r=4)
    warnings = [record.getMessage() for record in caplog.records if "are not carried" in record.getMessage()]
    assert warnings == [f"{sentence_transformer} is a sentence-transformers model (Transformer, Pooling, Normalize), "
                        "but its modules are not carried into the output folder: --lora_r writes a LoRA adapter and "
                        "its base (base_model/), which SentenceTransformer does not load; train without --lora_r to "
                        "keep them."]
    text_classification.train(**text_options(sentence_transformer, tmp_path / "lora"), lora_r=4, max_train_steps=1)
    assert (tmp_path / "lora" / "adapter_model.safetensors").is_file()
    assert not (tmp_path / "lora" / "modules.json").exists()
