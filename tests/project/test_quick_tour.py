"""The quick tour installs what it uses: its install command, run as printed in a fresh virtual environment, then
every one of its python blocks, in order, offline.

Why a test of its own: ``tests/project/test_docs.py`` runs the other pages in the suite's environment, which has
every extra installed, so a block that imports what the page's install command leaves out (the tour once named the
``finetune`` extra and imported sentence-transformers and MiniLM, which only ``test`` installs) would pass there.

Only PyTorch is reused, where the tour's first command allows it: it installs ``torch==2.13.0``, the CPU build this
environment already holds, so the fresh environment sees this one's torch (and the packages torch needs) instead of
unpacking the same wheel again; the tour's ``pip install torch==2.13.0`` then finds it installed. Everything the
second command installs comes from pip's indexes and cache into the fresh environment.
"""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.metadata import distribution
from pathlib import Path

from helpers.docs import fenced_blocks, run_page_blocks
from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[2]
TOUR = REPO / "docs" / "quick-tour.md"
INSTALL_TIMEOUT_S = 600


def install_commands(page: Path) -> list[str]:
    """The ``pip install`` lines of ``page``'s first ``bash`` block: how it says to install what it uses."""
    first = fenced_blocks(page.read_text(), "bash")[0][1]
    return [line for line in first.splitlines() if line.startswith("pip install")]


def with_its_requirements(name: str) -> list:
    """The installed distribution ``name`` and those it requires (for this platform, without extras), recursively."""
    found, pending = {}, [name]
    while pending:
        dist = distribution(pending.pop())
        key = dist.metadata["Name"].lower()
        if key in found:
            continue
        found[key] = dist
        for text in dist.requires or []:
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                pending.append(requirement.name)
    return list(found.values())


def seeing_this_torch(python: str, folder: Path) -> None:
    """Let the environment of ``python`` import this environment's torch and the packages torch requires, and no
    other: links to their files in ``folder``, named by a ``.pth`` file in its site-packages."""
    folder.mkdir()
    for dist in with_its_requirements("torch"):
        for top in {Path(file).parts[0] for file in dist.files or []} - {"..", "__pycache__"}:
            if not (folder / top).exists():
                (folder / top).symlink_to(dist.locate_file(top))
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], check=True,
                          capture_output=True, text=True, timeout=60).stdout.strip()
    (Path(site) / "this_environments_torch.pth").write_text(f"{folder}\n")


def test_the_quick_tour_runs_in_a_fresh_environment_installed_as_it_says(tmp_path):
    commands = install_commands(TOUR)
    assert commands == ['pip install torch==2.13.0 && pip install -e ".[tour]"']
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    seeing_this_torch(str(venv / "bin" / "python"), tmp_path / "torch")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env |= {"PATH": f"{venv / 'bin'}{os.pathsep}{env['PATH']}", "VIRTUAL_ENV": str(venv),
            "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1", "PIP_NO_COMPILE": "1"}
    for command in commands:  # from the repository's root, as the tour says
        install = subprocess.run(["bash", "-c", command], cwd=REPO, env=env, capture_output=True, text=True,
                                 timeout=INSTALL_TIMEOUT_S)
        assert install.returncode == 0, install.stdout[-2000:] + install.stderr[-3000:]
    assert "Requirement already satisfied: torch==2.13.0" in install.stdout  # this environment's, reused

    result = run_page_blocks(TOUR, "docs/quick-tour.md", tmp_path, python=str(venv / "bin" / "python"), env=env)
    assert result.returncode == 0, f"a block failed\n{result.stdout[-3000:]}\n{result.stderr[-6000:]}"
