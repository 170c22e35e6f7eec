"""The studies' tests import their scripts as the scripts import each other, from the study's folder; a table they
build from per-run results made up in a test is kept in the test's own folder, never over the study's tables."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "research" / "long_documents"))


@pytest.fixture(autouse=True)
def tables_in_the_test_folder(tmp_path, monkeypatch):
    import table_files

    monkeypatch.setattr(table_files, "TABLES", tmp_path / "tables")
