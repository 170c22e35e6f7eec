"""The house's sizes, read from the files: no source file over 350 lines but ``modeling/``'s model files (one per
family, each with all of its heads), and every guide under ``docs/`` at most about 350 lines (380), the results page
and the generated or cumulative reference pages apart."""

from __future__ import annotations

import fnmatch
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SOURCE_LIMIT, GUIDE_LIMIT = 350, 380
SOURCES = ("*.py", "*.sh")
SKIPPED_FOLDERS = {".git", ".venv", "build", "_build", "__pycache__"}
MODEL_FILES = "modeling/modeling_*.py"
NOT_GUIDES = {"docs/results.md", "docs/changelog.md", "docs/cli.md", "docs/api.md"}


def repository_files(pattern: str) -> list[str]:
    """The repository's files matching ``pattern``, relative to it: those git tracks or would track (not the ones it
    ignores, such as a benchmark's trained models or a virtual environment); outside a git checkout, every file but
    those in virtual environments and build output."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            capture_output=True, text=True)
    if listed.returncode == 0:
        return sorted(name for name in listed.stdout.splitlines()
                      if fnmatch.fnmatch(Path(name).name, pattern) and (REPO / name).is_file())
    return sorted(str(path.relative_to(REPO)) for path in REPO.rglob(pattern)
                  if not SKIPPED_FOLDERS & set(path.relative_to(REPO).parts[:-1])
                  and not any(part.endswith(".egg-info") for part in path.parts))


def lines(name: str) -> int:
    return len((REPO / name).read_text().splitlines())


def test_no_source_file_is_over_350_lines_but_the_model_files():
    sources = [name for pattern in SOURCES for name in repository_files(pattern)]
    assert "hf_effattn/folders/output_folders.py" in sources and "finetune/run_mlm.py" in sources
    too_long = {name: lines(name) for name in sources
                if lines(name) > SOURCE_LIMIT and not fnmatch.fnmatch(name, MODEL_FILES)}
    assert too_long == {}


def test_every_guide_is_at_most_about_350_lines():
    guides = [name for name in repository_files("*.md") if name.startswith("docs/") and name not in NOT_GUIDES]
    assert "docs/fine-tuning.md" in guides
    assert {name: lines(name) for name in guides if lines(name) > GUIDE_LIMIT} == {}
