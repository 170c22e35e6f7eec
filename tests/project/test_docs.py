"""The documentation site runs as printed and builds strictly.

Every ```` ```python ```` block of every page under ``docs/`` runs: a page's blocks in order, in one fresh
process, in a temporary working directory, offline (``HF_HUB_OFFLINE=1``); a traceback names the page and its
line. A ```` ```py ```` block is shown only (it needs the Hub, a GPU or a long run). The site builds with every
Sphinx warning an error (broken links, stale API names, bad docstring markup), and the README's relative links
lead to files that exist.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
PAGE_TIMEOUT_S = 600  # all of one page's blocks, with a fresh interpreter importing torch and transformers
BUILD_TIMEOUT_S = 600

# Runs the blocks in one namespace; each is compiled at its own line of the page, so tracebacks point there.
RUNNER = """
import json, sys
namespace = {"__name__": "__main__"}
for block in json.loads(open(sys.argv[1]).read()):
    code = "\\n" * (block["line"] - 1) + block["code"]
    exec(compile(code, block["page"], "exec"), namespace)
"""


def fenced_blocks(text: str, language: str) -> list[tuple[int, str]]:
    """The code blocks fenced as ``language`` in Markdown ``text``: (line of their first code line, code).

    A fence closes only with its own character, at least as long (so a ```` ```` ```` block can show a ```` ``` ````
    one, which stays shown)."""
    blocks, fence, info, start, lines = [], None, "", 0, []
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if fence is None:
            opening = re.match(r"(`{3,}|~{3,})(.*)$", stripped)
            if opening:
                fence, info, start, lines = opening.group(1), opening.group(2).strip(), number + 1, []
        elif re.fullmatch(re.escape(fence[0]) + "{%d,}" % len(fence), stripped):
            if info == language:
                blocks.append((start, "\n".join(lines) + "\n"))
            fence = None
        else:
            lines.append(line)
    return blocks


def pages_with_python() -> list[Path]:
    return [page for page in sorted(DOCS.rglob("*.md"))
            if "_build" not in page.parts and fenced_blocks(page.read_text(), "python")]


def test_fenced_blocks_takes_python_only_and_keeps_nested_fences_shown():
    text = "\n".join(["# Page", "```python", "a = 1", "```", "```py", "b = 2", "```", "````markdown", "```python",
                      "c = 3", "```", "````", "~~~python", "d = 4", "~~~"])
    assert fenced_blocks(text, "python") == [(3, "a = 1\n"), (14, "d = 4\n")]


def run_page_blocks(page: Path, name: str, tmp_path: Path) -> subprocess.CompletedProcess:
    """Run the python blocks of ``page`` (shown as ``name`` in tracebacks) in a fresh process, offline, in an
    empty working directory under ``tmp_path``."""
    blocks = [{"page": name, "line": line, "code": code} for line, code in fenced_blocks(page.read_text(), "python")]
    (tmp_path / "blocks.json").write_text(json.dumps(blocks))
    (tmp_path / "run_blocks.py").write_text(RUNNER)
    work = tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg"}
    return subprocess.run([sys.executable, str(tmp_path / "run_blocks.py"), str(tmp_path / "blocks.json")],
                          cwd=work, env=env, capture_output=True, text=True, timeout=PAGE_TIMEOUT_S)


@pytest.mark.parametrize("page", pages_with_python(), ids=lambda page: str(page.relative_to(DOCS)))
def test_page_python_blocks_run_in_order_offline(page, tmp_path):
    name = str(page.relative_to(REPO))
    result = run_page_blocks(page, name, tmp_path)
    assert result.returncode == 0, f"{name}: a python block failed\n{result.stdout[-3000:]}\n{result.stderr[-6000:]}"


def test_a_failing_block_is_reported_at_its_page_and_line(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Page\n\n```python\nx = 1\n```\n\nText.\n\n```python\nassert x == 2, 'x is not 2'\n```\n")
    result = run_page_blocks(page, "docs/page.md", tmp_path)
    assert result.returncode == 1
    assert 'File "docs/page.md", line 10' in result.stderr and "x is not 2" in result.stderr


@pytest.mark.skipif(importlib.util.find_spec("sphinx") is None,
                    reason="Sphinx is not installed: pip install -e '.[docs]' (the test extra installs it too)")
def test_site_builds_with_every_warning_an_error(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", "-d", str(tmp_path / "doctrees"),
         str(DOCS), str(tmp_path / "html")],
        cwd=REPO, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S,
    )
    assert result.returncode == 0, result.stderr[-6000:]
    assert (tmp_path / "html" / "index.html").is_file() and (tmp_path / "html" / "api.html").is_file()


def test_readme_relative_links_lead_to_files_that_exist():
    readme = (REPO / "README.md").read_text()
    targets = {target.split("#")[0] for target in re.findall(r"\]\(([^)\s]+)\)", readme)
               if not re.match(r"[a-z]+:", target) and not target.startswith("#")}
    assert any(target.startswith("docs/") for target in targets), "the README links no docs page"
    missing = sorted(target for target in targets if not (REPO / target).exists())
    assert not missing, f"README links to missing files: {missing}"
