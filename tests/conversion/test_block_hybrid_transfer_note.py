"""Attention transfer on a block hybrid moves it away from the chunked reader it starts as (measured on long man
pages: DBA beside blocks of 512 found 0.603 of the needles straight from conversion, 0.477 after a transfer of 150
steps): ``convert`` says so in one line, naming the documented path, and says nothing beside a window."""

from __future__ import annotations

import logging

import pytest

from helpers.finetuning import one_torch_thread  # noqa: F401 (autouse: one torch thread)
from helpers.finetuning import tiny_text_checkpoint
from hf_effattn.conversion import convert
from test_block_hybrids import OWN_LENGTH, long_texts_file

NOTE = (f"Attention transfer on a block hybrid (local_block={OWN_LENGTH}) trains its memory and gates to reproduce the "
        "checkpoint's full softmax attention, which moves the model away from the chunked reader it starts as; the "
        "documented way to train a block hybrid is masked-LM continued pretraining (finetune/run_mlm.py) after a "
        "conversion without --transfer_data (Python: transfer=None).")


@pytest.mark.parametrize("local_part, noted", [({"local_block": OWN_LENGTH}, True), ({"local_window": 8}, False)])
def test_a_transfer_on_a_block_hybrid_is_noted_once_with_the_documented_path(local_part, noted, tmp_path, caplog):
    transfer = {"data": long_texts_file(tmp_path), "steps": 1, "batch_size": 4}
    with caplog.at_level(logging.WARNING, logger="hf_effattn"):
        convert(tiny_text_checkpoint(), "dba", tmp_path / "out", transfer=transfer, max_length=2 * OWN_LENGTH,
                base_model="someone/tiny", **local_part)
    messages = [record.getMessage() for record in caplog.records if "Attention transfer on" in record.getMessage()]
    assert messages == ([NOTE] if noted else [])
