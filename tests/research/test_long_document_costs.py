"""The long-document benchmark's measurements of cost and of the memory (research/long_documents): how a cost
is named and run, a block row's cost against its target, a finished measurement kept unless asked again, and the gates
held by ``memory_mass.py``."""

import sys
from types import SimpleNamespace

import pytest
import torch

import memory_mass
from rows import ROWS


def test_a_finished_measurement_is_kept_unless_asked_again(tmp_path, monkeypatch, capsys):
    import json

    import cost
    import runs

    monkeypatch.setattr(runs, "RESULTS", tmp_path)
    monkeypatch.setattr(cost, "set_threads", lambda threads: None)
    path = tmp_path / "cost" / "2048.json"
    path.parent.mkdir()
    path.write_text('{"steps": {"sdpa": {}}}\n')
    monkeypatch.setattr(cost, "measure", lambda *args: pytest.fail("measured over a finished result"))
    monkeypatch.setattr(sys, "argv", ["cost.py", "--length", "2048"])
    cost.main()
    assert path.read_text() == '{"steps": {"sdpa": {}}}\n'
    assert "results/cost/2048.json exists: kept (--again measures it anew)" in capsys.readouterr().out
    measured = {"sdpa": {"step_seconds": 1.0, "all_seconds": [1.0], "peak_mib": 2.0}}
    monkeypatch.setattr(cost, "measure", lambda *args: measured)
    monkeypatch.setattr(sys, "argv", ["cost.py", "--length", "2048", "--again"])
    cost.main()
    assert json.loads(path.read_text())["steps"] == measured


@pytest.mark.parametrize("device, dtype, batch_size, masked_lm, blocks, fast_paths, expected", [
    ("cpu", "float32", 1, False, False, False, "2048"),
    ("cpu", "float32", 1, True, False, False, "masked_lm_2048"),
    ("cuda", "bfloat16", 8, False, False, False, "2048_cuda_bfloat16_batch8"),
    ("cpu", "float32", 1, False, True, False, "2048_blocks"),
    ("cpu", "float32", 1, False, False, True, "2048_fast_paths"),
])
def test_a_cost_is_named_by_where_and_how_it_ran(monkeypatch, device, dtype, batch_size, masked_lm, blocks,
                                                 fast_paths, expected):
    import cost

    monkeypatch.setattr(cost, "default_device", lambda: torch.device(device))
    args = SimpleNamespace(length=2048, masked_lm=masked_lm, no_attention_dropout=False, dtype=dtype,
                           batch_size=batch_size, blocks=blocks, fast_paths=fast_paths)
    assert cost.measurement_name(args) == expected


@pytest.mark.parametrize("fast_paths, expected", [(False, {"row": "exact"}),
                                                  (True, {"row": "exact", "row auto": "auto"})])
def test_each_cost_subject_runs_in_its_fast_path_mode(monkeypatch, fast_paths, expected):
    """Every step runs on the exact path whatever the environment says; with ``--fast_paths`` each row also on its
    fast path, as a subject of its own."""
    import cost

    from hf_effattn.modeling.fast_paths import fast_path_mode, fast_paths as in_mode

    modes = []
    monkeypatch.setattr(cost, "exact_subjects", lambda args, dropout: {"row": lambda: modes.append(fast_path_mode())})
    with in_mode("fast"):
        steps = cost.subjects(SimpleNamespace(fast_paths=fast_paths), None)
        for step in steps.values():
            step()
    assert dict(zip(steps, modes, strict=True)) == expected


def test_a_block_row_is_costed_on_the_row_of_its_architecture(tmp_path, monkeypatch):
    """A lever of the pretraining (no transfer, the gates' learning rate) has its row's cost: the weights do not
    change it; the target is the step over the chunked reader's."""
    import json

    import block_tables
    import runs

    monkeypatch.setattr(runs, "RESULTS", tmp_path)
    (tmp_path / "cost").mkdir()
    steps = {"local-b512": {"step_seconds": 2.0}, "kerformer-b512": {"step_seconds": 2.5},
             "psf-b512": {"step_seconds": 8.0}}
    (tmp_path / "cost" / "8192_no_attention_dropout_blocks.json").write_text(json.dumps({"steps": steps}))
    assert block_tables.cost_of("kerformer-b512-direct-gate-lr0.1") == "met (1.25 vs 1.5)"
    assert block_tables.cost_of("psf-b512-direct") == "**missed** (4 vs 1.5)"
    assert block_tables.cost_of("dba-b512") == "not run"
    fast = {"local-b512": {"step_seconds": 2.0}, "psf-b512": {"step_seconds": 8.0},
            "psf-b512 auto": {"step_seconds": 2.8}}
    (tmp_path / "cost" / "8192_no_attention_dropout_fast_paths.json").write_text(json.dumps({"steps": fast}))
    assert block_tables.cost_of("psf-b512-direct") == "**missed** (4 vs 1.5); fast path: met (1.4 vs 1.5)"
    assert block_tables.cost_of("kerformer-b512") == "met (1.25 vs 1.5)"


def test_holding_the_memory_scales_every_gate_s_odds_and_restores_them_after():
    """``memory_mass.py`` reads at 8,192 with each gate's odds times 3/15; afterwards the model is as it was."""
    from torch import nn

    import hf_effattn

    model = nn.ModuleList([hf_effattn.build_attention("kerformer", 16, 2, {"local_block": 4}, max_length=16)
                           for _ in range(2)])
    for layer in model:
        nn.init.normal_(layer.window.mechanism_logit)
    logits = [layer.window.mechanism_logit.detach().clone() for layer in model]
    factor = memory_mass.held_factor(ROWS["kerformer-b512-direct-gate-lr0.1-mlm160"])
    assert memory_mass.held_factor(ROWS["kerformer-b512-direct-gate-lr0.1-mlm160-at8192"]) == 1
    with memory_mass.gate_odds_scaled(model, factor):
        for layer, logit in zip(model, logits):
            weight, before = layer.window.mechanism_weight().detach(), torch.sigmoid(logit)
            torch.testing.assert_close(weight / (1 - weight), 0.2 * before / (1 - before))
    assert all(torch.equal(layer.window.mechanism_logit.detach(), logit) for layer, logit in zip(model, logits))
