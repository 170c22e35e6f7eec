"""The scripts outside the package (benchmarks/, research/, finetune/) import, often inside their functions, names
of hf_effattn that a test run may never reach: every such name must exist where the script takes it from."""

import ast
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = sorted(path for path in [*ROOT.glob("benchmarks/**/*.py"), *ROOT.glob("research/**/*.py"),
                                   *ROOT.glob("finetune/*.py")]
                 if "models" not in path.parts)  # not the model code saved with the benchmarks' checkpoints


def package_imports(path: Path) -> list[tuple[str, str]]:
    """``(module, name)`` of every ``from hf_effattn... import name`` in the file, at any depth."""
    return [(node.module, alias.name) for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module
            and node.module.split(".")[0] == "hf_effattn" for alias in node.names]


def test_the_scripts_are_found():
    names = {path.relative_to(ROOT).as_posix() for path in SCRIPTS}
    assert {"benchmarks/gpu/profile_steps.py", "research/long_documents/run_classification.py",
            "finetune/run_mlm.py"} <= names


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda path: path.relative_to(ROOT).as_posix())
def test_every_name_a_script_imports_from_the_package_exists(path):
    missing = [f"{module}.{name}" for module, name in package_imports(path)
               if not hasattr(importlib.import_module(module), name)
               and importlib.util.find_spec(f"{module}.{name}") is None]
    assert missing == []
