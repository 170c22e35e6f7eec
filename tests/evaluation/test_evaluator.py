"""``evaluate`` on tiny models: each measure equals a reference computed from the models' own logits and hidden
states over inputs framed by hand; the chunked reader of blocks without a memory is the model itself, and a block
hybrid's chunks are its blocks with the gate closed; bad arguments and documents are refused before any reading."""

from __future__ import annotations

import math

import pytest
import torch
from helpers.evaluation import BLOCK, LENGTH, PASSAGE, block_model, random_documents

from hf_effattn import EffAttnRobertaForMaskedLM
from hf_effattn.evaluation import evaluate
from hf_effattn.evaluation.fixed_masking import IGNORED, mask_document
from hf_effattn.evaluation.long_context_words import long_context_targets
from hf_effattn.evaluation.retrieval import passage_start
from hf_effattn.models.hybrid_parts import only_part

MEASURES = ("masked_lm_loss", "long_context_loss", "retrieval_recall_at_1")


def read_by_hand(model, tokenizer, ids: list[int], frame: int, whole: bool):
    """``(logits [L, V], hidden [L, C])`` at the content ids ``ids``, framed every ``frame`` tokens and read as one
    input (``whole``) or frame by frame, through the model's own forward."""
    pieces = [[tokenizer.cls_token_id, *ids[start:start + frame - 2], tokenizer.sep_token_id]
              for start in range(0, len(ids), frame - 2)]
    inputs = [[token for piece in pieces for token in piece]] if whole else pieces
    logits, hidden = [], []
    for row in inputs:
        output = model(input_ids=torch.tensor([row]), output_hidden_states=True)
        content = [position for position in range(len(row)) if position % frame not in (0, frame - 1)
                   and position != len(row) - 1]
        logits.append(output.logits[0, content])
        hidden.append(output.hidden_states[-1][0, content])
    return torch.cat(logits), torch.cat(hidden)


def ratio(totals: list[float], counts: list[int]) -> tuple[float, float]:
    if sum(counts) == 0:
        return math.nan, math.nan
    value = sum(totals) / sum(counts)
    residuals = [total - value * count for total, count in zip(totals, counts)]
    return value, math.sqrt(len(counts) / (len(counts) - 1) * sum(r * r for r in residuals)) / sum(counts)


def reference(model, tokenizer, texts: list[str], limit: int, frame: int | None, chunk_length: int,
              passage_length: int = PASSAGE, seed: int = 0):
    """Each reader's ``{measure: (value, standard error)}``, computed by hand."""
    documents = [tokenizer(text, add_special_tokens=False)["input_ids"][:limit] for text in texts]
    results = {}
    for name, whole, reader_frame in (("model", True, frame or limit + 2), ("chunks", False, chunk_length)):
        loss, far_loss, far_count, counts, embedded, queries = [], [], [], [], [], []
        with torch.no_grad(), only_part(model, "window" if name == "chunks" and frame else None):
            for index, ids in enumerate(documents):
                inputs, labels = mask_document(torch.tensor(ids), tokenizer.mask_token_id, len(tokenizer), seed, index)
                logits, _ = read_by_hand(model, tokenizer, inputs.tolist(), reader_frame, whole)
                targets = [position for position, label in enumerate(labels.tolist()) if label != IGNORED]
                each = [-torch.log_softmax(logits[p], -1)[labels[p]].item() for p in targets]
                far = long_context_targets(inputs, labels, chunk_length - 2).tolist()
                loss.append(sum(each))
                counts.append(len(each))
                far_loss.append(sum(value for value, is_far in zip(each, far) if is_far))
                far_count.append(sum(far))
                embedded.append(read_by_hand(model, tokenizer, ids, reader_frame, whole)[1].mean(0))
                start = passage_start(len(ids), chunk_length - 2, passage_length, seed, index)
                passage = ids[start:start + passage_length]
                queries.append(read_by_hand(model, tokenizer, passage, passage_length + 2, True)[1].mean(0))
        hit = [float(max(range(len(embedded)), key=lambda d: torch.cosine_similarity(query, embedded[d], 0)) == i)
               for i, query in enumerate(queries)]
        results[name] = {"masked_lm_loss": ratio(loss, counts), "long_context_loss": ratio(far_loss, far_count),
                         "retrieval_recall_at_1": ratio(hit, [1] * len(hit))}
    return results


def assert_matches(report, expected: dict) -> None:
    for name in MEASURES:
        for reader in ("model", "chunks"):
            estimate = getattr(report.measures[name], reader)
            assert (estimate.value, estimate.standard_error) == pytest.approx(expected[reader][name], abs=1e-5,
                                                                              nan_ok=True), \
                (name, reader)


def test_a_block_hybrids_measures_are_those_computed_by_hand(checkpoint):
    model = block_model(checkpoint, "kerformer", initial_mechanism_weight=0.5)
    texts = random_documents(5, 40)
    report = evaluate(model, texts, tokenizer=tokenizer_of(checkpoint), passage_length=PASSAGE, progress=False)
    assert report.settings["chunk_length"] == BLOCK and report.settings["max_length"] == LENGTH
    assert_matches(report, reference(model, tokenizer_of(checkpoint), texts, 24, BLOCK, BLOCK))
    assert report.measures["long_context_loss"].count > 0


def test_an_extended_models_chunks_are_its_checkpoints_length_and_its_measures_those_by_hand(checkpoint):
    """Positions extended by copying from 8 tokens: the chunks are 8 tokens long by default."""
    torch.manual_seed(0)
    model = EffAttnRobertaForMaskedLM.from_pretrained(checkpoint, attention_type="kerformer", max_length=64).eval()
    texts = random_documents(4, 60, seed=1)
    report = evaluate(model, texts, tokenizer=tokenizer_of(checkpoint), passage_length=PASSAGE, progress=False)
    assert report.settings["chunk_length"] == BLOCK and report.settings["max_length"] == 64
    assert_matches(report, reference(model, tokenizer_of(checkpoint), texts, 62, None, BLOCK))


def test_a_plain_checkpoint_reads_as_transformers_own_model_does(checkpoint):
    """A RoBERTa masked-LM folder, its chunks shorter than its 8 tokens: the reference is Transformers' model."""
    from transformers import RobertaForMaskedLM

    texts = random_documents(4, 40, seed=2)
    report = evaluate(checkpoint, texts, chunk_length=4, passage_length=2, progress=False)
    settings = report.settings
    assert (settings["max_length"], settings["chunk_length"], settings["local_block"]) == (8, 4, None)
    assert_matches(report, reference(RobertaForMaskedLM.from_pretrained(checkpoint).eval(), tokenizer_of(checkpoint),
                                     texts, 6, None, 4, passage_length=2))


def test_blocks_without_a_memory_read_as_their_chunks_and_a_hybrids_chunks_close_its_gate(checkpoint):
    texts, tokenizer = random_documents(5, 40), tokenizer_of(checkpoint)
    options = {"tokenizer": tokenizer, "passage_length": PASSAGE, "progress": False}
    blocks = evaluate(block_model(checkpoint), texts, **options)
    for name in MEASURES:
        comparison = blocks.measures[name]
        assert comparison.model.value == pytest.approx(comparison.chunks.value, abs=1e-6)
        assert comparison.model_minus_chunks.value == pytest.approx(0, abs=1e-6)
    hybrid = evaluate(block_model(checkpoint, "kerformer", initial_mechanism_weight=0.5), texts, **options)
    for name in MEASURES:
        assert hybrid.measures[name].chunks.value == pytest.approx(blocks.measures[name].chunks.value, abs=1e-6)
    assert abs(hybrid.measures["masked_lm_loss"].model_minus_chunks.value) > 1e-5  # the memory speaks, above 1e-6


def tokenizer_of(checkpoint: str):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(checkpoint)


@pytest.fixture()
def no_reading(monkeypatch):
    """Any reading of a document fails the test: the errors below come first."""
    def read(*args, **kwargs):
        raise AssertionError("a document was read")

    monkeypatch.setattr("hf_effattn.evaluation.readers.Reader.hidden_states", read)


@pytest.mark.parametrize("options, texts, message", [
    ({}, random_documents(1, 40), "documents: 1 given, and passage retrieval needs at least two: give more."),
    ({}, [*random_documents(2, 40), "w1 w2 w3"], "document 3 has 3 tokens, fewer than one chunk and a passage past it "
                                                 "(10): long context has nothing to add to it: drop it, or give a "
                                                 "smaller chunk_length."),
    ({"max_length": 33}, random_documents(2, 40), "max_length=33: the model reads 3 to 32 tokens"),
    ({"chunk_length": 40}, random_documents(2, 40), "chunk_length=40: chunks are framed by [CLS] and [SEP] and read "
                                                    "within max_length=32: give a length from 3 to 32."),
    ({"max_length": 10}, random_documents(2, 40), "max_length=10 reads 6 tokens of text, fewer than a chunk and a "
                                                  "passage past it (10)"),
    ({"passage_length": 0}, random_documents(2, 40), "passage_length=0: give a positive number of tokens."),
])
def test_bad_arguments_and_documents_are_refused_before_reading(checkpoint, no_reading, options, texts, message):
    with pytest.raises(ValueError, match="^[^\n]*$") as error:
        evaluate(block_model(checkpoint), texts, tokenizer=tokenizer_of(checkpoint),
                 **{"passage_length": PASSAGE, **options})
    assert message in str(error.value)


def test_a_plain_checkpoint_that_reads_one_chunk_is_told_to_convert(checkpoint, no_reading):
    with pytest.raises(ValueError, match=r"^max_length=8 reads 6 tokens of text, fewer than a chunk and a passage past "
                                         r"it \(70\): give a model converted to read longer \(hf-effattn convert "
                                         r"--local_block --max_length 4096\), or a smaller chunk_length or "
                                         r"passage_length.$"):
        evaluate(checkpoint, random_documents(2, 40))


def test_a_checkpoint_without_a_masked_lm_head_and_a_model_without_its_tokenizer_are_refused(checkpoint, tmp_path,
                                                                                                no_reading):
    from transformers import RobertaModel

    RobertaModel.from_pretrained(checkpoint).save_pretrained(tmp_path / "encoder")
    tokenizer_of(checkpoint).save_pretrained(tmp_path / "encoder")
    with pytest.raises(ValueError, match=r"encoder has no masked-LM head \(it lacks lm_head\..*\): evaluate a "
                                         r"masked-LM checkpoint, or train a head first"):
        evaluate(tmp_path / "encoder", random_documents(2, 40))
    with pytest.raises(TypeError, match="tokenizer=None: with a model object, pass its tokenizer too"):
        evaluate(block_model(checkpoint), random_documents(2, 40))
    with pytest.raises(TypeError, match="documents: expected a file's path or a list of texts, got int"):
        evaluate(checkpoint, 3)
    with pytest.raises(TypeError, match="model_or_path: expected an EffAttnRobertaForMaskedLM or the path or Hub id of "
                                        "a masked-LM checkpoint, got RobertaModel: save it with save_pretrained and "
                                        "pass its folder."):
        evaluate(RobertaModel.from_pretrained(checkpoint), random_documents(2, 40))
