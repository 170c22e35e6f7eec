"""Left padding in a block model, checkpoint by checkpoint: the aligned blocks count real tokens only, but a BERT
checkpoint numbers its absolute positions from the first token of the padded row, so a left-padded document reads
other positions than alone and differs from itself, as in Transformers' own ``BertModel``; position ids that skip
the padding make it exact. A RoBERTa checkpoint numbers positions over real tokens: left padding changes nothing."""

from __future__ import annotations

import pytest
import torch
from transformers import BertModel, RobertaModel

import hf_effattn
from helpers.models import save_source

SOURCES = {"roberta": RobertaModel, "bert": BertModel}
SIZE = {"roberta": 18, "bert": 20}  # the tiny checkpoints' own lengths (helpers.models.TEXT), their blocks here
SHORT = 7  # the short document's tokens, fewer than a block


def skipping_padding(attention_mask: torch.Tensor) -> torch.Tensor:
    """``[B, N]`` position ids that count real tokens only: ``0 .. n-1`` over each row's real tokens."""
    return (attention_mask.cumsum(dim=1) - 1).clamp(min=0)


def left_padded_batch(pad: int, length: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A long document of ``length`` tokens and a short one of :data:`SHORT`, left-padded to it: ``(input_ids
    [2, length], attention_mask [2, length], the short document's ids [SHORT])``."""
    generator = torch.Generator().manual_seed(0)
    input_ids = torch.randint(3, 40, (2, length), generator=generator)
    attention_mask = torch.ones_like(input_ids)
    attention_mask[1, :length - SHORT] = 0
    input_ids = input_ids.masked_fill(attention_mask == 0, pad)
    return input_ids, attention_mask, input_ids[1, -SHORT:]


def short_document_gap(model, pad: int, length: int, **position_ids) -> float:
    """The largest difference between the short document's last hidden state, left-padded in a batch, and alone."""
    input_ids, attention_mask, short = left_padded_batch(pad, length)
    ids = {name: make(attention_mask) for name, make in position_ids.items()}
    alone = {name: make(torch.ones(1, SHORT, dtype=torch.long)) for name, make in position_ids.items()}
    with torch.no_grad():
        padded = model(input_ids, attention_mask=attention_mask, **ids).last_hidden_state[1, -SHORT:]
        reference = model(short[None], **alone).last_hidden_state[0]
    return (padded - reference).abs().max().item()


@pytest.fixture(params=["local", "dba"])
def block_model(request, tmp_path):
    """A tiny BERT checkpoint converted with aligned blocks of its own length, at four times it, alone (``local``)
    or beside a memory (DBA, its gate at its default start): ``(model, its BERT reference, pad id)``."""
    reference = save_source(BertModel, "bert", tmp_path)
    model = hf_effattn.EffAttnRobertaModel.from_pretrained(tmp_path, attention_type=request.param,
                                                           local_block=SIZE["bert"], max_length=4 * SIZE["bert"])
    return model.eval(), reference, reference.config.pad_token_id


def test_with_bert_positions_a_left_padded_document_differs_from_itself_alone(block_model):
    model, reference, pad = block_model
    assert short_document_gap(model, pad, 4 * SIZE["bert"]) > 0.1
    assert short_document_gap(reference, pad, SIZE["bert"]) > 0.1  # Transformers' BertModel, at its own length


def test_with_bert_positions_that_skip_the_padding_a_left_padded_document_is_itself_alone(block_model):
    model, reference, pad = block_model
    assert short_document_gap(model, pad, 4 * SIZE["bert"], position_ids=skipping_padding) < 1e-5
    assert short_document_gap(reference, pad, SIZE["bert"], position_ids=skipping_padding) < 1e-5


def test_with_roberta_positions_left_padding_changes_nothing(tmp_path):
    source = save_source(RobertaModel, "roberta", tmp_path)
    model = hf_effattn.EffAttnRobertaModel.from_pretrained(tmp_path, attention_type="local", local_block=SIZE["roberta"],
                                                           max_length=4 * SIZE["roberta"]).eval()
    assert short_document_gap(model, source.config.pad_token_id, 4 * SIZE["roberta"]) < 1e-5
