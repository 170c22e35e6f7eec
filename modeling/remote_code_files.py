"""The remote-code files of a saved folder, trimmed to those its model runs.

``save_pretrained`` copies the modules of the model's class and of its config into the folder, with every module
they import as ``from .name import ...``, recursively. ``attentions.py`` imports every mechanism, so that the registry
is complete wherever the package runs; copied as it is, it would give every folder every mechanism's file, all of
which a user must read before trusting ``trust_remote_code=True``. :func:`trim_remote_code` rewrites the folder's
copy of ``attentions.py`` to import only the mechanisms the model needs, then removes the files that nothing in the
folder imports any more. It reads the imports as Transformers does when it loads the folder
(``get_relative_imports``), so what stays is exactly what loading asks for.
"""

from __future__ import annotations

import ast
import json
import textwrap
from pathlib import Path

from transformers.dynamic_module_utils import get_relative_imports

REGISTRY_FILE = "attentions.py"  # imports every mechanism, so that the registry is complete


def trim_remote_code(folder, entry_modules: set[str], dropped_modules: set[str]) -> list[str]:
    """Trim the remote code saved in ``folder``: its ``attentions.py`` no longer imports ``dropped_modules`` (the
    mechanisms the model does not run), and the files of this folder's code that the ``entry_modules`` (those
    ``auto_map`` names) no longer import, directly or not, are removed. Returns the removed files' names."""
    folder = Path(folder)
    registry = folder / REGISTRY_FILE
    if registry.is_file():
        registry.write_text(without_imports(registry.read_text(), dropped_modules))
    needed = imported_files(folder, entry_modules)
    removed = sorted(name for name in own_files() if (folder / name).is_file() and name not in needed)
    for name in removed:
        (folder / name).unlink()
    return removed


def own_files() -> set[str]:
    """The names of this code's files (those ``save_pretrained`` may have copied)."""
    return {path.name for path in Path(__file__).parent.glob("*.py")} - {"__init__.py"}


def imported_files(folder: Path, entry_modules: set[str]) -> set[str]:
    """The files of ``entry_modules`` in ``folder`` and of every module they import relatively, recursively."""
    needed, pending = set(), [f"{module}.py" for module in entry_modules]
    while pending:
        name = pending.pop()
        if name in needed or not (folder / name).is_file():
            continue
        needed.add(name)
        pending += [f"{module}.py" for module in get_relative_imports(folder / name)]
    return needed


def without_imports(source: str, dropped_modules: set[str]) -> str:
    """``source`` (``attentions.py``) without its top-level ``from .module import ...`` of ``dropped_modules``, and
    without the names those imported in its ``__all__``."""
    tree = ast.parse(source)
    imports = [node for node in tree.body if isinstance(node, ast.ImportFrom) and node.level == 1
               and node.module in dropped_modules]
    dropped_names = {alias.asname or alias.name for node in imports for alias in node.names}
    skipped = {line for node in imports for line in range(node.lineno, node.end_lineno + 1)}
    replaced = {}  # first line of __all__ -> its new text
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(target, "id", None) == "__all__" for target in node.targets):
            names = [name for name in ast.literal_eval(node.value) if name not in dropped_names]
            skipped |= set(range(node.lineno, node.end_lineno + 1))
            replaced[node.lineno] = all_assignment(names)
    lines = source.splitlines(keepends=True)
    return "".join(replaced.get(number, "") if number in skipped else line
                   for number, line in enumerate(lines, start=1))


def all_assignment(names: list[str]) -> str:
    """``__all__ = [...]`` listing ``names``, wrapped at 116 characters."""
    listed = textwrap.fill(", ".join(json.dumps(name) for name in names), width=116, initial_indent="    ",
                           subsequent_indent="    ", break_on_hyphens=False)
    return f"__all__ = [\n{listed},\n]\n"
