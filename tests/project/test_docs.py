"""The documentation site runs as printed and builds strictly.

Every ```` ```python ```` block of every page under ``docs/`` runs: a page's blocks in order, in one fresh
process, in a temporary working directory, offline (``HF_HUB_OFFLINE=1``); a traceback names the page and its
line. The quick tour's run in a fresh virtual environment installed as the tour says
(``tests/project/test_quick_tour.py``), not here. A ```` ```py ```` block is shown only (it needs the Hub, a GPU or
a long run). The site builds with every Sphinx warning an error (broken links, stale API names, bad docstring
markup), and the README's relative links lead to files that exist.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.docs import fenced_blocks, run_page_blocks

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
BUILD_TIMEOUT_S = 600
RUN_ELSEWHERE = {DOCS / "quick-tour.md"}  # in a fresh environment: tests/project/test_quick_tour.py


def pages_with_python() -> list[Path]:
    return [page for page in sorted(DOCS.rglob("*.md")) if "_build" not in page.parts and page not in RUN_ELSEWHERE
            and fenced_blocks(page.read_text(), "python")]


def test_fenced_blocks_takes_python_only_and_keeps_nested_fences_shown():
    text = "\n".join(["# Page", "```python", "a = 1", "```", "```py", "b = 2", "```", "````markdown", "```python",
                      "c = 3", "```", "````", "~~~python", "d = 4", "~~~"])
    assert fenced_blocks(text, "python") == [(3, "a = 1\n"), (14, "d = 4\n")]


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
