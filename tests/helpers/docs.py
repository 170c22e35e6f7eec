"""Running the documentation's code blocks: a Markdown page's ```` ```python ```` blocks, found as a Markdown reader
finds them, run in order in one fresh process, offline, in an empty working directory, each compiled at its own line
of the page so that a traceback points there (``tests/project/test_docs.py`` runs every page's, and
``tests/project/test_quick_tour.py`` the quick tour's in a fresh virtual environment)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

PAGE_TIMEOUT_S = 600  # all of one page's blocks, with a fresh interpreter importing torch and transformers

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


def run_page_blocks(page: Path, name: str, tmp_path: Path, python: str = sys.executable,
                    env: dict | None = None) -> subprocess.CompletedProcess:
    """Run the python blocks of ``page`` (shown as ``name`` in tracebacks) in a fresh process of ``python``
    (default: this one), offline, in an empty working directory under ``tmp_path``; ``env``: the environment
    (default: this one's)."""
    blocks = [{"page": name, "line": line, "code": code} for line, code in fenced_blocks(page.read_text(), "python")]
    (tmp_path / "blocks.json").write_text(json.dumps(blocks))
    (tmp_path / "run_blocks.py").write_text(RUNNER)
    work = tmp_path / "work"
    work.mkdir()
    env = {**(os.environ if env is None else env), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg"}
    return subprocess.run([python, str(tmp_path / "run_blocks.py"), str(tmp_path / "blocks.json")],
                          cwd=work, env=env, capture_output=True, text=True, timeout=PAGE_TIMEOUT_S)
