"""The long-document study's tables (research/long_documents/table_files.py): built from the per-run results where a
machine holds them, kept as compact tables, and read back from those on a fresh clone, where the per-run results are
not committed."""

from pathlib import Path

import pytest

import block_tables
import runs
import table_files
import tables

STUDY_TABLES = Path(__file__).resolve().parents[2] / "research" / "long_documents" / "tables"


def test_a_table_built_from_the_runs_results_is_read_back_the_same_once_they_are_gone(tmp_path, monkeypatch):
    monkeypatch.setattr(runs, "RESULTS", tmp_path / "results")
    runs.write_result("masked_lm", "local-b512_mlm", {"loss": 5.0})
    built = table_files.table_rows("made_up", lambda: [["`local-b512`", "5.000", None], ["tokens", 4880]])
    assert (table_files.TABLES / "made_up.jsonl").read_text() == '["`local-b512`", "5.000", null]\n["tokens", 4880]\n'
    (tmp_path / "results" / "masked_lm" / "local-b512_mlm.json").unlink()
    assert table_files.table_rows("made_up", lambda: pytest.fail("built again without results")) == built


def test_a_table_never_built_has_no_rows_and_reads_not_run(tmp_path, monkeypatch):
    monkeypatch.setattr(runs, "RESULTS", tmp_path / "results")
    assert table_files.table_rows("never_built", lambda: pytest.fail("built without results")) == []
    assert tables.finetuned_table() == "Fine-tuning (`run_classification.py`, a GPU measurement): not run."


def test_a_fresh_clone_prints_the_study_s_tables_from_the_compact_ones(tmp_path, monkeypatch):
    """The committed tables give the report's figures, with no per-run result on the machine."""
    monkeypatch.setattr(runs, "RESULTS", tmp_path / "results")
    monkeypatch.setattr(table_files, "TABLES", STUDY_TABLES)
    assert "the head trained alone): **6.315**; after the same masked-LM pretraining at 512" in tables.masked_lm_table()
    memory, without = ("local-b512-mlm160-at512-rerun-then-singularformer-gated-mlm160",
                       "local-b512-mlm160-at512-rerun-then-local-pieces2048-mlm160")
    assert f"| `{memory}` | `{without}` | -0.009 ± 0.003 |" in block_tables.same_training_table()
    assert "587 of 4,880 are *far*" in tables.long_range_table()
    assert not list(tmp_path.glob("results/*/*.json"))  # nothing measured or written per run
