"""The documentation's settings tables say what the code declares.

Each mechanism page (``docs/mechanisms/<name>.md``, ``docs/baselines.md``) has, for every registered mechanism with
settings, a table headed ``| `<name>` setting | Allowed values | Default | What it does |`` whose rows give each
setting's name, the values its ``setting(...)`` declaration allows (``Spec.describe()``) and its default, in the
declaration's order. A setting added, removed, renamed or given another range or default fails here until the page
says so."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

import hf_effattn

DOCS = Path(__file__).resolve().parents[2] / "docs"
HEADER = re.compile(r"^\| `([a-z_]+)` setting \| Allowed values \| Default \| What it does \|$")
ROW = re.compile(r"^\| `([a-z_]+)` \| ([^|]+) \| `([^`|]+)` \| [^|]+ \|$")


def settings_tables() -> dict[str, list[tuple[str, str, str]]]:
    """``{mechanism: [(setting, allowed values, default), ...]}`` from every table of the mechanism pages."""
    tables = {}
    for page in sorted((DOCS / "mechanisms").glob("*.md")) + [DOCS / "baselines.md"]:
        lines = page.read_text().splitlines()
        for i, line in enumerate(lines):
            header = HEADER.match(line)
            if header:
                assert header[1] not in tables, f"{header[1]} has two settings tables"
                rows = []
                for row in lines[i + 2:]:
                    if not row.startswith("|"):
                        break
                    match = ROW.match(row)
                    assert match, f"{page.name}: a row of {header[1]}'s settings table is not `name` | ... : {row}"
                    rows.append(match.groups())
                tables[header[1]] = rows
    return tables


def declared(name: str) -> list[tuple[str, str, str]]:
    """What the code declares: ``(setting, Spec.describe(), repr(default))`` per field, in order; the local
    window's settings, which every mechanism inherits, only where the mechanism declares them anew (they have a
    table of their own on the local-window page)."""
    fields = dataclasses.fields(hf_effattn.get_attention_class(name).settings_class)
    return [described(field) for field in fields if described(field) not in WINDOW_SETTINGS]


def described(field) -> tuple[str, str, str]:
    return field.name, field.metadata["spec"].describe(), repr(field.default)


WINDOW_SETTINGS = [described(field) for field in dataclasses.fields(hf_effattn.AttentionSettings)]
WITH_SETTINGS = [name for name in hf_effattn.list_attentions() if declared(name)]


def test_window_settings_table_equals_the_declarations():
    lines = (DOCS / "local-window.md").read_text().splitlines()
    start = lines.index("| Window setting | Allowed values | Default | What it does |")
    rows = [ROW.match(line).groups() for line in lines[start + 2:start + 2 + len(WINDOW_SETTINGS)]]
    assert [(name, allowed.strip(), default) for name, allowed, default in rows] == WINDOW_SETTINGS


def test_only_registered_mechanisms_have_tables():
    assert set(settings_tables()) <= set(WITH_SETTINGS)


@pytest.mark.parametrize("name", WITH_SETTINGS)
def test_settings_table_equals_the_declarations(name):
    rows = [(setting, allowed.strip(), default) for setting, allowed, default in settings_tables().get(name, [])]
    expected = declared(name)
    table = "\n".join(f"| `{setting}` | {allowed} | `{default}` | ... |" for setting, allowed, default in expected)
    assert rows == expected, f"The settings table of {name!r} should read (first three columns):\n{table}"
