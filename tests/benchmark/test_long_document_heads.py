"""The long-document benchmark's MLM head (benchmarks/long_documents/pretrain.py): every stage records the head it
started from, a stage from another head is refused, and a row is held against chunks pretrained from its own."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "long_documents"))

import block_tables  # noqa: E402
import common  # noqa: E402
import pretrain  # noqa: E402


def test_a_stage_on_another_head_than_the_rows_were_measured_on_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(pretrain, "RESULTS", tmp_path)
    monkeypatch.setattr(pretrain, "HEAD_FOLDER", tmp_path / "head")
    (tmp_path / "masked_lm").mkdir()
    with pytest.raises(SystemExit, match="holds no MLM head: copy there the one the results were measured on"):
        pretrain.check_head()
    (tmp_path / "head").mkdir()
    (tmp_path / "head" / "model.safetensors").write_bytes(b"retrained")
    pretrain.check_head()  # no result records a head yet
    retrained = pretrain.head_identity()
    for name, stage, head in [("sdpa-512_head", "head", retrained),
                              ("local-b512_extend", "extend", "0123456789abcdef")]:
        (tmp_path / "masked_lm" / f"{name}.json").write_text(json.dumps({"stage": stage, "head_sha256": head}))
    with pytest.raises(SystemExit, match=f"holds MLM head {retrained}, the results' rows were measured on "
                                         "0123456789abcdef.*restore that folder"):
        pretrain.check_head()  # the head's own result does not vouch for it
    (tmp_path / "masked_lm" / "local-b512_mlm.json").write_text(json.dumps({"stage": "mlm", "head_sha256": retrained}))
    pretrain.check_head()


def test_the_head_is_checked_once_before_the_first_stage_that_starts_from_it(monkeypatch):
    calls = []
    monkeypatch.setattr(pretrain, "kept", lambda kind, name, again: False)
    monkeypatch.setattr(pretrain, "set_threads", lambda threads: None)
    monkeypatch.setattr(pretrain, "check_head", lambda: calls.append("check"))
    monkeypatch.setattr(pretrain, "run_stage", lambda row, stage, args: calls.append(stage))
    monkeypatch.setattr(sys, "argv", ["pretrain.py", "--rows", "local-b512", "--stages", "head", "mlm_512", "extend"])
    pretrain.main()
    assert calls == ["head", "check", "mlm_512", "extend"]  # a head trained here is checked against the results


def test_a_row_is_held_against_chunks_pretrained_from_its_own_head(tmp_path, monkeypatch):
    monkeypatch.setattr(common, "RESULTS", tmp_path)
    (tmp_path / "masked_lm").mkdir()
    row, chunks = "kerformer-b512-direct-gate-lr0.1-mlm160-gated", "local-b512-mlm160"
    for name, head in [(row, "new"), (chunks, None)]:
        (tmp_path / "masked_lm" / f"{name}_mlm.json").write_text(json.dumps({"head_sha256": head} if head else {}))
    assert block_tables.control_of(row) == chunks  # no rerun: the only chunks there are
    (tmp_path / "masked_lm" / f"{chunks}-rerun_mlm.json").write_text(json.dumps({"head_sha256": "new"}))
    assert block_tables.control_of(row) == f"{chunks}-rerun"
    assert block_tables.control_of(f"{chunks}-rerun") == chunks  # the rerun against the first: the head's effect
