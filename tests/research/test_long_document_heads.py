"""The long-document benchmark's MLM head (research/long_documents/pretrain.py): every stage records the head it
started from, a stage from another head is refused, and a row is held against chunks pretrained from its own."""

import json
import sys
from dataclasses import replace

import pytest

import controls
import pretrain
import rows
import runs


def test_a_stage_on_another_head_than_the_rows_were_measured_on_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(pretrain, "RESULTS", tmp_path)
    monkeypatch.setattr(pretrain, "HEAD_FOLDER", tmp_path / "head")
    (tmp_path / "masked_lm").mkdir()
    with pytest.raises(SystemExit, match="holds no MLM head: copy there the one the results were measured on"):
        pretrain.check_head("local-b512")
    (tmp_path / "head").mkdir()
    (tmp_path / "head" / "model.safetensors").write_bytes(b"retrained")
    pretrain.check_head("local-b512")  # no result records a head yet
    retrained = pretrain.head_identity()
    for name, stage, head in [("sdpa-512_head", "head", retrained),
                              ("local-b512_extend", "extend", "0123456789abcdef")]:
        (tmp_path / "masked_lm" / f"{name}.json").write_text(json.dumps({"stage": stage, "head_sha256": head}))
    with pytest.raises(SystemExit, match=f"holds MLM head {retrained}, the results' rows were measured on "
                                         "0123456789abcdef.*restore that folder"):
        pretrain.check_head("local-b512")  # the head's own result does not vouch for it
    (tmp_path / "masked_lm" / "local-b512_mlm.json").write_text(json.dumps({"stage": "mlm", "head_sha256": retrained}))
    pretrain.check_head("local-b512")


def test_a_rerun_on_a_head_trained_again_is_measured_on_the_head_it_declares_alone(tmp_path, monkeypatch):
    """A rerun row (``Row.head``) runs on its own head, which the results' other rows do not record, and on no other;
    its results do not vouch for that head for the other rows."""
    monkeypatch.setattr(pretrain, "RESULTS", tmp_path)
    monkeypatch.setattr(pretrain, "HEAD_FOLDER", tmp_path / "head")
    (tmp_path / "masked_lm").mkdir()
    (tmp_path / "head").mkdir()
    (tmp_path / "head" / "model.safetensors").write_bytes(b"retrained")
    rerun = rows.AT_512_AGAIN
    monkeypatch.setitem(pretrain.ROWS, rerun.name, replace(rerun, head=pretrain.head_identity()))
    (tmp_path / "masked_lm" / "local-b512_mlm.json").write_text(json.dumps({"row": "local-b512", "stage": "mlm",
                                                                             "head_sha256": "0123456789abcdef"}))
    pretrain.check_head(rerun.name)
    for row in (f"{rerun.name}-then-local-mlm160", f"{rerun.name}-then-singularformer-gated-mlm160"):
        assert rows.ROWS[row].head == rerun.head and rows.ROWS[row].start == rerun.name  # on the same head
    (tmp_path / "masked_lm" / f"{rerun.name}_mlm.json").write_text(json.dumps({"row": rerun.name, "stage": "mlm",
                                                                                "head_sha256": pretrain.head_identity()}))
    with pytest.raises(SystemExit, match="the results' rows were measured on 0123456789abcdef"):
        pretrain.check_head("local-b512")
    (tmp_path / "head" / "model.safetensors").write_bytes(b"trained a third time")
    with pytest.raises(SystemExit, match=f"{rerun.name} is measured on MLM head .* restore that head's folder"):
        pretrain.check_head(rerun.name)


def test_the_head_is_checked_before_every_stage_that_starts_from_it(monkeypatch):
    calls = []
    monkeypatch.setattr(pretrain, "kept", lambda kind, name, again: False)
    monkeypatch.setattr(pretrain, "set_threads", lambda threads: None)
    monkeypatch.setattr(pretrain, "check_head", lambda row: calls.append(f"check {row}"))
    monkeypatch.setattr(pretrain, "run_stage", lambda row, stage, args: calls.append(stage))
    monkeypatch.setattr(sys, "argv", ["pretrain.py", "--rows", "local-b512", "--stages", "head", "mlm_512", "extend"])
    pretrain.main()
    # a head trained here is checked against the results, for each row (a rerun declares a head of its own)
    assert calls == ["head", "check sdpa-512", "mlm_512", "check local-b512", "extend"]


def test_a_row_is_held_against_chunks_pretrained_from_its_own_head(tmp_path, monkeypatch):
    monkeypatch.setattr(runs, "RESULTS", tmp_path)
    (tmp_path / "masked_lm").mkdir()
    row, chunks = "kerformer-b512-direct-gate-lr0.1-mlm160-gated", "local-b512-mlm160"
    for name, head in [(row, "new"), (chunks, None)]:
        (tmp_path / "masked_lm" / f"{name}_mlm.json").write_text(json.dumps({"head_sha256": head} if head else {}))
    assert controls.control_of(row) == chunks  # no rerun: the only chunks there are
    (tmp_path / "masked_lm" / f"{chunks}-rerun_mlm.json").write_text(json.dumps({"head_sha256": "new"}))
    assert controls.control_of(row) == f"{chunks}-rerun"
    for rerun in (f"{chunks}-rerun", f"{chunks}-seed2-rerun", rows.AT_512_AGAIN.name):  # what the head changed
        assert controls.control_of(rerun) == rerun.removesuffix("-rerun")
