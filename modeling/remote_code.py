"""The remote code of a saved folder: one ``configuration_effattn.py`` and one ``modeling_effattn_<family>.py``,
generated from this folder's modules for the model saved, as Transformers generates its one-file models from
``modular_*.py``.

``save_pretrained`` copies the module of the model's class and of its config with every module they import, a
closure of some twenty files that a user would have to read before ``trust_remote_code=True``. :func:`write_remote_code`
replaces them with two files holding only what the saved model runs, readable top to bottom:

* each module is read with ``ast``; its top-level definitions (classes, functions, constants) are kept where the
  roots reach them by name (annotations aside: the files use ``from __future__ import annotations``, so they are
  never evaluated), with their docstrings and comments, in the modules' import order and each module's own order,
  under a comment naming the module they come from;
* the roots of ``configuration_effattn.py``: the config class and the settings classes of the model's mechanism
  and of softmax attention (which the config's defaults name); of the modeling file: the model classes that
  ``auto_map`` names, the model's mechanism, its local part where it has one (the part's class, registered by kind:
  a model without one holds none of that code), and what a kept module runs when imported (its registrations, its
  version check); the modeling file imports the config file's definitions it uses, as Transformers' files do;
* the methods of :data:`PACKAGE_ONLY` are left out (or keep their signature with a one-line body): the package's
  own machinery (loading other architectures' checkpoints and extending a model's input size, which ``hf-effattn
  convert`` does, and writing this very code) is not what a saved folder runs;
* a module imported inside a function (PSF's Triton kernels, ``chord_kernels.py``, imported on CUDA only, where
  Triton is) is copied beside the two files as it is, so that loading never imports what a CPU machine lacks.
"""

from __future__ import annotations

import ast
import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

MODELING = Path(__file__).parent
CONFIG_MODULE = "configuration_effattn"
PRELUDE = "supported_versions"  # its check runs before anything imports from Transformers
# The package's own machinery, which a saved folder does not run: loading other architectures' checkpoints and
# extending a model's input size (``hf-effattn convert`` does both), and writing this very code. "Class.method" (or
# "*.method", in every class) -> None: the method is left out (the class inherits Transformers' or its base's), or
# the statement its body becomes.
PACKAGE_ONLY = {
    "EffAttnPreTrainedModel.write_remote_code":
        "return []  # this file is the generated remote code: Transformers copies it with the folder as it is",
    "EffAttnPreTrainedModel._upload_modified_files": None,
    "*.from_pretrained": None,
    "*.plan_load": None,
    "*.from_plan": None,
    "*.config_from_checkpoint": None,
    "*.source_defaults": None,
    "*.position_period": None,
    "*.extension_period": None,
    "*.check_block_alignment": None,
    "*.extend_position_embeddings": None,
    "*.extend_max_length": None,
    "*.extend_length_sized_weights": None,
    "*.input_size": None,
    "*.size_values": None,
    "*.resized": None,
    "*.check_extends": None,
}


def package_only(class_name: str, method: ast.stmt) -> tuple[bool, str | None]:
    """Whether ``method`` of class ``class_name`` is in :data:`PACKAGE_ONLY`, and the statement its body becomes
    (None: left out)."""
    name = getattr(method, "name", None)
    for key in (f"{class_name}.{name}", f"*.{name}"):
        if name is not None and key in PACKAGE_ONLY:
            return True, PACKAGE_ONLY[key]
    return False, None


@dataclass
class Definition:
    """One top-level statement of a module as the generated code holds it: its source (with the comments and
    decorators above it), the names it binds and the names it uses."""

    module: str
    node: ast.stmt
    source: str
    binds: set[str] = field(default_factory=set)
    uses: set[str] = field(default_factory=set)
    annotated: set[str] = field(default_factory=set)  # names in its annotations: imported where the file can
    lazy: set[str] = field(default_factory=set)  # modules it imports inside a function (copied beside, as they are)

    @property
    def runs_on_import(self) -> bool:
        """A statement that binds nothing (a call: a registration, a check) runs whenever its module is imported."""
        return not self.binds


def generated_definition(module: str, node: ast.stmt, lines: list[str], first: int) -> Definition:
    """The definition of ``node`` (its source from line ``first``), a class's :data:`PACKAGE_ONLY` methods left out
    or with their bodies replaced, and the names what remains uses."""
    kept_lines = lines[first - 1:node.end_lineno]
    uses, annotated = used_names(node), used_names(node, annotations=True)
    if isinstance(node, ast.ClassDef):
        uses = set().union(*(used_names(item) for item in node.bases + node.keywords + node.decorator_list))
        annotated = set()
        for method in reversed(node.body):
            listed, statement = package_only(node.name, method)
            if not listed:
                uses |= used_names(method)
                annotated |= used_names(method, annotations=True)
                continue
            body = method.body[1:] if ast.get_docstring(method) is not None else method.body
            if statement is None:
                start = comment_start(lines, min([method.lineno] + [d.lineno for d in method.decorator_list]), first)
                kept_lines[start - first:method.end_lineno - first + 1] = []
            else:
                replaced = textwrap.indent(statement, " " * body[0].col_offset) + "\n"
                kept_lines[body[0].lineno - first:body[-1].end_lineno - first + 1] = [replaced]
    source = "".join(kept_lines)
    if isinstance(node, ast.ClassDef):  # one blank line where a method was left out
        source = re.sub(r"\n(\s*\n){2,}", "\n\n", source)
    lazy = {inner.module for inner in ast.walk(ast.parse(source))
            if isinstance(inner, ast.ImportFrom) and inner.level == 1}
    return Definition(module, node, source, bound_names(node), uses, annotated, lazy)


@dataclass
class Module:
    """A module of this folder as :func:`read_module` reads it."""

    name: str
    docstring: str | None
    imports: list[ast.stmt]  # absolute imports, ``from __future__`` aside
    relative: list[str]  # the modules it imports as ``from .name import ...``
    definitions: list[Definition]


def read_module(name: str, folder: Path = MODELING) -> Module:
    """Module ``name`` of ``folder`` (this one)."""
    source = (folder / f"{name}.py").read_text()
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    docstring = ast.get_docstring(tree, clean=True)
    body = tree.body[1:] if docstring is not None else tree.body
    imports, relative, definitions = [], [], []
    earliest = body[0].lineno if body else 1
    for node in body:
        first = comment_start(lines, min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])]),
                              earliest)
        earliest = node.end_lineno + 1
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            relative.append(node.module)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            imports += [] if getattr(node, "module", None) == "__future__" else [node]
        elif bound_names(node) != {"__all__"}:  # a module's exports: the generated file is one namespace
            definitions.append(generated_definition(name, node, lines, first))
    return Module(name, docstring, imports, relative, definitions)


def comment_start(lines: list[str], first: int, earliest: int) -> int:
    """The line where the comments just above line ``first`` start (not before ``earliest``)."""
    while first - 1 >= earliest and lines[first - 2].lstrip().startswith("#"):
        first -= 1
    return first


def bound_names(node: ast.stmt) -> set[str]:
    """The module-level names ``node`` binds (a function, a class, an assigned name)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
    return {target.id for target in targets if isinstance(target, ast.Name)}


def used_names(node: ast.AST, annotations: bool = False) -> set[str]:
    """The names ``node`` reads outside its annotations (never evaluated under ``from __future__ import
    annotations``), or with ``annotations`` those it names in them."""
    names, pending = set(), [(node, False)]
    while pending:
        current, annotating = pending.pop()
        if isinstance(current, ast.Name) and annotating == annotations:
            names.add(current.id)
        for name, child in ast.iter_fields(current):
            inside = annotating or name in ("annotation", "returns")
            pending += [(item, inside) for item in (child if isinstance(child, list) else [child])
                        if isinstance(item, ast.AST)]
    return names


def closure(entries: list[str], folder: Path = MODELING) -> list[Module]:
    """The modules of ``entries`` in ``folder`` and every module they import relatively, dependencies first,
    :data:`PRELUDE` first of all."""
    modules: dict[str, Module] = {}

    def visit(name: str) -> None:
        if name in modules:
            return
        modules[name] = None
        module = read_module(name, folder)
        for imported in module.relative:
            visit(imported)
        modules.pop(name)
        modules[name] = module

    for entry in entries:
        visit(entry)
    return sorted(modules.values(), key=lambda module: module.name != PRELUDE)


def definitions_by_name(modules: list[Module]) -> dict[str, Definition]:
    """Each module-level name of ``modules`` and its definition; a name defined in two modules is an error (the
    generated file has one namespace), unless both define it alike (``logger = logging.getLogger(__name__)``)."""
    defined: dict[str, Definition] = {}
    for definition in (d for module in modules for d in module.definitions):
        for name in definition.binds:
            other = defined.setdefault(name, definition)
            if other.module != definition.module and other.source.strip() != definition.source.strip():
                raise ValueError(f"{name} is defined in both {other.module}.py and {definition.module}.py: the "
                                 "generated remote code needs one meaning per name; rename one.")
    return defined


def reachable(modules: list[Module], roots: set[str], elsewhere: set[str] = frozenset()) -> list[Definition]:
    """The definitions that ``roots`` (names) reach by name, and every statement that runs on import in a module
    something is kept from, in the modules' order; ``elsewhere``: names the file imports instead of defining."""
    defined = definitions_by_name(modules)
    kept: dict[int, Definition] = {}
    pending = [defined[name] for name in roots]
    while pending:
        definition = pending.pop()
        if id(definition) not in kept:
            kept[id(definition)] = definition
            pending += [defined[name] for name in definition.uses - elsewhere if name in defined]
        if not pending:
            modules_kept = {d.module for d in kept.values()}
            pending = [d for module in modules if module.name in modules_kept for d in module.definitions
                       if d.runs_on_import and id(d) not in kept]
    return [d for module in modules for d in module.definitions if id(d) in kept]


def import_lines(modules: list[Module], kept: list[Definition]) -> list[str]:
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


def render(modules: list[Module], kept: list[Definition], docstring: str, imported: list[str]) -> str:
    """One file: ``docstring``; the :data:`PRELUDE` module's kept definitions with their imports; the other
    imports, and ``from .configuration_effattn import`` the ``imported`` names; then each module's kept definitions
    under a comment naming it."""
    prelude = [d for d in kept if d.module == PRELUDE]
    rest = [d for d in kept if d.module != PRELUDE]
    blocks = [f'"""{docstring}\n"""', "from __future__ import annotations"]
    if prelude:
        blocks.append("\n".join(import_lines([m for m in modules if m.name == PRELUDE], prelude)))
        blocks += [d.source.strip("\n") for d in prelude]
    own_imports = [line for line in import_lines([m for m in modules if m.name != PRELUDE], rest)
                   if line not in blocks]
    blocks.append("\n".join(own_imports + ([""] if imported else [])
                            + ([wrapped_import(f".{CONFIG_MODULE}", imported)] if imported else [])))
    for module in modules:
        own = [d.source.strip("\n") for d in rest if d.module == module.name]
        if own:
            blocks.append(f"# {'-' * 40} {module.name}.py\n\n" + "\n\n\n".join(own))
    head, tail = blocks[:2], [block for block in blocks[2:] if block.strip()]
    return "\n\n".join(head) + "\n\n" + "\n\n\n".join(tail) + "\n"


def generated_files(config, model_classes: list[type]) -> dict[str, str]:
    """File name -> source of the remote code of a model of ``model_classes`` (one family's, as ``auto_map`` names
    them) configured by ``config`` (its mechanism and its local part): ``configuration_effattn.py`` and the family's
    modeling file."""
    from .attention_registry import _LOCAL_PARTS, composition_for
    from .attentions import get_attention_class, get_settings_class

    config_class, attention_type, local = type(config), config.attention_type, config.local_part
    prelude = {name for d in read_module(PRELUDE).definitions for name in d.binds}
    config_roots = {config_class.__name__, get_settings_class(attention_type).__name__,
                    get_settings_class(config_class.attention_type).__name__} | prelude
    config_modules = closure([CONFIG_MODULE])
    config_kept = reachable(config_modules, config_roots)
    config_names = set().union(*(d.binds for d in config_kept))
    family = model_classes[0].__module__.rsplit(".", 1)[-1]
    model_modules = closure([family])
    model_roots = {cls.__name__ for cls in model_classes} | {get_attention_class(attention_type).__name__} | prelude
    if local is not None:
        mechanism = get_attention_class(attention_type)
        model_roots |= {_LOCAL_PARTS[local.kind].__name__, composition_for(mechanism, local).__name__}
    shared = config_names - prelude  # each file checks the version itself: a tool may import the modeling file alone
    model_kept = [d for d in reachable(model_modules, model_roots, shared) if not d.binds & shared]
    used = set().union(*(d.uses | d.annotated for d in model_kept))
    lazy = set().union(*(d.lazy for d in model_kept))  # a function's own import (PSF's Triton kernels, on CUDA only)
    return {
        f"{CONFIG_MODULE}.py": render(config_modules, config_kept, file_docstring(CONFIG_MODULE, attention_type), []),
        f"{family}.py": render(model_modules, model_kept, file_docstring(family, attention_type),
                               sorted(used & shared)),
        **{f"{module}.py": (MODELING / f"{module}.py").read_text() for module in sorted(lazy)},
    }


def file_docstring(module: str, attention_type: str) -> str:
    """The generated file's docstring: its module's, and what it was generated from."""
    own = read_module(module).docstring or ""
    note = (f"Generated by hf_effattn from its model code (the modules named below) for a model with the "
            f"{attention_type!r} attention: edit those modules, not this file.")
    return f"{own}\n\n{textwrap.fill(note, width=116)}"


def write_remote_code(model, folder) -> list[str]:
    """Replace the modules that ``save_pretrained`` copied into ``folder`` with the two files generated for
    ``model`` (:func:`generated_files`); returns the names of the files written."""
    folder = Path(folder)
    families = [type(model).__module__.rsplit(".", 1)[-1], CONFIG_MODULE]
    files = generated_files(model.config, list(model.auto_classes.values()))
    modules = closure(families)  # what save_pretrained copied (not a tokenizer's file), functions' imports included
    copied = {f"{name}.py" for name in {m.name for m in modules} | {n for m in modules for d in m.definitions
                                                                     for n in d.lazy}}
    for name in copied - set(files):
        (folder / name).unlink(missing_ok=True)
    for name, source in files.items():
        (folder / name).write_text(source)
    return sorted(files)
