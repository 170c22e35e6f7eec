"""The documentation's settings tables say what the code declares.

Each mechanism page (``docs/mechanisms/<name>.md``, ``docs/baselines.md``) has, for every registered mechanism with
settings, a table headed ``| `<name>` setting | Allowed values | Default | What it does |`` whose rows give each
setting's name, the values its ``setting(...)`` declaration allows (``Spec.describe()``) and its default, in the
declaration's order. A setting added, removed, renamed or given another range or default fails here until the page
says so."""

from __future__ import annotations

import dataclasses
import itertools
import re
from pathlib import Path

import pytest

import hf_effattn
from hf_effattn.modeling.local_settings import LocalPartSettings

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


def declared(settings_class: type) -> list[tuple[str, str, str]]:
    """What the code declares: ``(setting, Spec.describe(), repr(default))`` per field, in order."""
    return [described(field) for field in dataclasses.fields(settings_class)]


def described(field) -> tuple[str, str, str]:
    return field.name, field.metadata["spec"].describe(), repr(field.default)


WITH_SETTINGS = [name for name in hf_effattn.list_attentions() if declared(hf_effattn.get_attention_class(name).settings_class)]


def test_the_local_part_settings_table_equals_the_declarations():
    """The model's local part (``local_settings.py``), on the local-window page, every row and no other."""
    lines = (DOCS / "local-window.md").read_text().splitlines()
    start = lines.index("| Local-part setting | Allowed values | Default | What it does |")
    table = itertools.takewhile(lambda line: line.startswith("|"), lines[start + 2:])
    rows = [ROW.match(line).groups() for line in table]
    assert [(name, allowed.strip(), default) for name, allowed, default in rows] == declared(LocalPartSettings)


def test_only_registered_mechanisms_have_tables():
    assert set(settings_tables()) <= set(WITH_SETTINGS)


@pytest.mark.parametrize("name", WITH_SETTINGS)
def test_settings_table_equals_the_declarations(name):
    rows = [(setting, allowed.strip(), default) for setting, allowed, default in settings_tables().get(name, [])]
    expected = declared(hf_effattn.get_attention_class(name).settings_class)
    table = "\n".join(f"| `{setting}` | {allowed} | `{default}` | ... |" for setting, allowed, default in expected)
    assert rows == expected, f"The settings table of {name!r} should read (first three columns):\n{table}"
