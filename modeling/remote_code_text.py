"""The text of a generated remote-code file (``remote_code.py`` chooses what it holds): its docstring, the config
file's names it imports first (that file checks the Transformers version) or the version check itself, the absolute
imports its definitions use, one line each, then each module's kept definitions under a comment naming it. The
``modules`` and ``kept`` below are ``remote_code.Module`` and ``remote_code.Definition`` lists.
"""

from __future__ import annotations

import ast
import textwrap

CONFIG_MODULE = "configuration_effattn"
PRELUDE = "supported_versions"  # its check runs before anything imports from Transformers


def import_lines(modules: list, kept: list) -> list[str]:
    """The absolute imports the ``kept`` definitions use, one line each (``import x``, ``from x import a, b``)."""
    used = set().union(*(d.uses | d.annotated for d in kept))
    plain, names_from, sources = [], {}, {}
    for node in (node for module in modules for node in module.imports):
        for alias in node.names:
            bound = alias.asname or alias.name.split(".")[0]
            if bound not in used:
                continue
            spelled = alias.name if alias.asname is None else f"{alias.name} as {alias.asname}"
            source = (getattr(node, "module", None), alias.name)
            if sources.setdefault(bound, source) != source:
                raise ValueError(f"{bound} names both {sources[bound]} and {source} in the modules' imports: the "
                                 "generated remote code needs one meaning per name; import one under another name.")
            if isinstance(node, ast.Import):
                plain.append(f"import {spelled}")
            else:
                names_from.setdefault(node.module, set()).add(spelled)
    froms = [wrapped_import(module, sorted(names)) for module, names in names_from.items()]
    return sorted(set(plain)) + sorted(froms)


def wrapped_import(module: str, names: list[str]) -> str:
    """``from module import names``, wrapped in parentheses past 120 characters."""
    line = f"from {module} import {', '.join(names)}"
    if len(line) <= 120:
        return line
    listed = textwrap.fill(", ".join(names) + ",", width=116, initial_indent="    ", subsequent_indent="    ")
    return f"from {module} import (\n{listed}\n)"


def render(modules: list, kept: list, docstring: str, imported: list[str]) -> str:
    """One file: ``docstring``; ``from .configuration_effattn import`` the ``imported`` names, first (that file checks
    the Transformers version), or the :data:`PRELUDE` module's kept definitions with their imports; the other
    imports; then each module's kept definitions under a comment naming it."""
    prelude = [d for d in kept if d.module == PRELUDE]
    rest = [d for d in kept if d.module != PRELUDE]
    blocks = [f'"""{docstring}\n"""', "from __future__ import annotations"]
    if imported:
        first = "# First: the config file checks the Transformers version."
        blocks.append(f"{first}\n{wrapped_import(f'.{CONFIG_MODULE}', imported)}")
    if prelude:
        blocks.append("\n".join(import_lines([m for m in modules if m.name == PRELUDE], prelude)))
        blocks += [d.source.strip("\n") for d in prelude]
    blocks.append("\n".join(line for line in import_lines([m for m in modules if m.name != PRELUDE], rest)
                            if line not in blocks))
    for module in modules:
        own = [d.source.strip("\n") for d in rest if d.module == module.name]
        if own:
            blocks.append(f"# From {module.name}.py\n\n" + "\n\n\n".join(own))
    head, tail = blocks[:2], [block for block in blocks[2:] if block.strip()]
    return "\n\n".join(head) + "\n\n" + "\n\n\n".join(tail) + "\n"
