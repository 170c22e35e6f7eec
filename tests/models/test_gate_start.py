"""The gate's default start beside aligned blocks, 0.01 for every mechanism (a freshly converted block hybrid is the
chunked reader it came from, 0.0003 nats from it on MiniLM), and folders saved with the former default, 0.1, loading
with the gates they were saved with (the gate's logit is a saved parameter)."""

from __future__ import annotations

import pytest
import torch
from helpers.models import MECHANISMS, text_config, text_inputs

import hf_effattn
from hf_effattn.models.hybrid_parts import mechanism_weights
from hf_effattn.modeling.local_settings import GATE_STARTS

WITH_BLOCKS = [name for name in MECHANISMS  # a memory beside the blocks
               if hf_effattn.describe_attention(name)["local_part_role"] in ("mixed", "kernel")]


@pytest.mark.parametrize("mechanism", WITH_BLOCKS)
def test_every_mechanism_starts_its_gates_at_one_hundredth_beside_blocks(mechanism):
    model = hf_effattn.EffAttnRobertaModel(text_config(f"{mechanism}+blocks"))
    assert mechanism_weights(model) == [pytest.approx([0.01] * 2)] * 2


def test_a_folder_saved_with_the_former_start_loads_with_its_own_gates(tmp_path, monkeypatch):
    with monkeypatch.context() as former:
        former.setitem(GATE_STARTS, ("mixed", "blocks"), 0.1)
        torch.manual_seed(0)
        saved = hf_effattn.EffAttnRobertaModel(text_config("dba+blocks")).eval()
    assert mechanism_weights(saved) == [pytest.approx([0.1] * 2)] * 2
    saved.save_pretrained(tmp_path)
    loaded = hf_effattn.EffAttnRobertaModel.from_pretrained(tmp_path)
    for mine, theirs in zip(loaded.encoder.layer, saved.encoder.layer):
        torch.testing.assert_close(mine.attention.self.window.mechanism_logit,
                                   theirs.attention.self.window.mechanism_logit, atol=0, rtol=0)
    with torch.no_grad():
        torch.testing.assert_close(loaded(**text_inputs()).last_hidden_state, saved(**text_inputs()).last_hidden_state,
                                   atol=0, rtol=0)
    assert mechanism_weights(hf_effattn.EffAttnRobertaModel(loaded.config)) == [pytest.approx([0.01] * 2)] * 2
