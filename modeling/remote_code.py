"""The remote code of a saved folder: one ``configuration_effattn.py`` and one ``modeling_effattn_<family>.py``
generated for its model from this folder's modules, as Transformers generates its one-file models from ``modular_*.py``:

* each module is read with ``ast``; its top-level definitions are kept where the roots reach them by name (annotations
  never pull one in, and lose the alternatives naming a class left out), with their docstrings and comments, in the
  modules' order, under a comment naming their module;
* the roots: the config class and the settings of the model's mechanism and of softmax (the config's default); the
  model classes that ``auto_map`` names, the mechanism, and its local part and their composition where it has one;
  and what a kept module runs on import. The modeling file imports the config file's definitions it uses, first;
* none of the package's own machinery (:data:`PACKAGE_ONLY`: conversion, extension, the fast paths, the papers'
  metadata, pickling, this generator; a folder runs the exact path, the one tested against the papers' references),
  stand-ins for a few functions (:data:`STAND_INS`) and, without a local part, none of its (:data:`WITHOUT_LOCAL_PART`).
"""

from __future__ import annotations

import ast
import dataclasses
import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

from transformers.dynamic_module_utils import get_relative_import_files

from .remote_code_text import CONFIG_MODULE, PRELUDE, render

MODELING = Path(__file__).parent
# The package's own machinery, which a saved folder does not run. "Class.member" (or "*.member", in every class) ->
# None (the method or class attribute is left out), or the statement a method's body becomes.
EXACT_PATH = "return None  # a Hub folder's code runs the exact path"
PACKAGE_ONLY = {
    # writing this very code (Transformers' save_pretrained copies the folder's code, and its auto_map, as they are)
    **dict.fromkeys(["EffAttnPreTrainedModel.save_pretrained", "EffAttnPreTrainedModel.write_remote_code",
                     "EffAttnPreTrainedModel._upload_modified_files"]),
    # loading other architectures' checkpoints and extending a model's input size: hf-effattn convert does both
    **dict.fromkeys(f"*.{name}" for name in (
        "from_pretrained", "plan_load", "from_plan", "config_from_checkpoint", "source_defaults", "position_period",
        "extension_period", "check_block_alignment", "extend_position_embeddings", "extend_max_length",
        "extend_length_sized_weights", "input_size", "size_values", "resized", "check_extends", "size_argument",
        "size_fields", "smaller_inputs_fix", "checkpoint_key_mappings", "source_config_overrides",
        "first_position_row")),
    # the papers' metadata and capabilities, which the cards and the registry's listing read; pickling by the classes
    # a hybrid is built from (a folder's model is saved with save_pretrained, and deep-copies as any module)
    **dict.fromkeys(f"*.{name}" for name in ("paper", "paper_url", "equations", "citation", "complexity",
                                             "supports_padding_mask", "has_aux_loss", "__reduce_ex__")),
    # the fast paths: a Hub folder's code runs the exact path, the one tested against the papers' references
    "*.fast_forward": EXACT_PATH,
    "*.fast_mix": EXACT_PATH,
    **dict.fromkeys(f"*.{name}" for name in ("tensors_forward", "fast_mixes", "mix_with_kernels", "mix_compiled",
                                             "has_own_kernels")),
}
# Functions a Hub folder's code holds a stand-in for: name -> the function of the same module written for that code
# (its config.json is in the current spelling, its registries hold its own classes once)
STAND_INS = {"current_spelling": "as_written", "registered": "registered_once"}
# ... and for a model without a local part, in place of the functions that read one (the config refuses its settings)
WITHOUT_LOCAL_PART = {"local_part_settings": "without_local_part", "hybrid_class": "without_hybrid_class"}


def package_only(class_name: str, member: ast.stmt) -> tuple[bool, str | None]:
    """Whether ``member`` (a method, or a class attribute) of class ``class_name`` is in :data:`PACKAGE_ONLY`, and the
    statement a method's body becomes (None: left out)."""
    targets = getattr(member, "targets", [getattr(member, "target", None)])
    name = getattr(member, "name", None) or next((t.id for t in targets if isinstance(t, ast.Name)), None)
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

    @property
    def runs_on_import(self) -> bool:
        """A statement that binds nothing (a call: a registration, a check) runs whenever its module is imported."""
        return not self.binds


def generated_definition(module: str, node: ast.stmt, lines: list[str], first: int) -> Definition:
    """The definition of ``node`` (its source from line ``first``), a class's :data:`PACKAGE_ONLY` members left out
    or its methods' bodies replaced, and the names what remains uses."""
    kept_lines = lines[first - 1:node.end_lineno]
    uses, annotated = used_names(node), used_names(node, annotations=True)
    if isinstance(node, ast.ClassDef):
        uses = set().union(*(used_names(item) for item in node.bases + node.keywords + node.decorator_list))
        annotated = set()
        for member in reversed(node.body):
            listed, statement = package_only(node.name, member)
            if not listed:
                uses |= used_names(member)
                annotated |= used_names(member, annotations=True)
                continue
            if statement is None:
                decorators = [d.lineno for d in getattr(member, "decorator_list", [])]
                start = comment_start(lines, min([member.lineno] + decorators), first)
                kept_lines[start - first:member.end_lineno - first + 1] = []
            else:
                body = member.body[1:] if ast.get_docstring(member) is not None else member.body
                replaced = textwrap.indent(statement, " " * body[0].col_offset) + "\n"
                kept_lines[body[0].lineno - first:body[-1].end_lineno - first + 1] = [replaced]
    source = "".join(kept_lines)
    if isinstance(node, ast.ClassDef):  # one blank line where a method was left out
        source = re.sub(r"\n(\s*\n){2,}", "\n\n", source)
    return Definition(module, node, source, bound_names(node), uses, annotated)


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


def substituted(modules: list[Module], substitutes: dict[str, str]) -> list[Module]:
    """``modules`` with the definition of each name in ``substitutes`` replaced by the function it names, renamed
    (:data:`STAND_INS`, :data:`WITHOUT_LOCAL_PART`)."""
    for module in modules:
        kept = []
        for definition in module.definitions:
            if definition.binds & substitutes.keys():
                continue
            name = next((name for name, other in substitutes.items() if definition.binds == {other}), None)
            if name is not None:
                source = re.sub(rf"\bdef {substitutes[name]}\(", f"def {name}(", definition.source, count=1)
                definition = dataclasses.replace(definition, source=source, binds={name})
            kept.append(definition)
        module.definitions = kept
    return modules


def without_alternatives(modules: list[Module], kept: list[Definition], elsewhere: set[str] = frozenset()):
    """``kept``, its annotations without the ``X |`` naming a class that ``modules`` define and the file does not hold
    (nor import, ``elsewhere``): without a local part, ``LocalPartSettings | None`` is ``None``."""
    held = set().union(elsewhere, *(d.binds for d in kept))
    absent = set().union(*(d.annotated for d in kept)) & {n for m in modules for d in m.definitions for n in d.binds}
    absent -= held
    if not absent:
        return kept
    names = "|".join(sorted(absent))
    alternative = re.compile(rf"\b(?:{names})\b\s*\|\s*|\s*\|\s*\b(?:{names})\b")
    return [dataclasses.replace(d, source=alternative.sub("", d.source), annotated=d.annotated - absent) for d in kept]


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


def generated_files(config, model_classes: list[type]) -> dict[str, str]:
    """File name -> source of the remote code of a model of ``model_classes`` (one family's, as ``auto_map`` names
    them) configured by ``config`` (its mechanism and its local part): ``configuration_effattn.py`` and the family's
    modeling file."""
    from .attention_registry import _LOCAL_PARTS, composition_for
    from .attentions import get_attention_class, get_settings_class

    config_class, attention_type, local = type(config), config.attention_type, config.local_part
    config_roots = {config_class.__name__, get_settings_class(attention_type).__name__,
                    get_settings_class(config_class.attention_type).__name__, "check_transformers_version"}
    substitutes = {**STAND_INS, **(WITHOUT_LOCAL_PART if local is None else {})}
    config_modules = substituted(closure([CONFIG_MODULE]), substitutes)
    config_kept = without_alternatives(config_modules, reachable(config_modules, config_roots))
    config_names = set().union(*(d.binds for d in config_kept))
    family = model_classes[0].__module__.rsplit(".", 1)[-1]
    model_modules = substituted(closure([family]), substitutes)
    model_roots = {cls.__name__ for cls in model_classes} | {get_attention_class(attention_type).__name__}
    if local is not None:
        mechanism = get_attention_class(attention_type)
        model_roots |= {_LOCAL_PARTS[local.kind].__name__, composition_for(mechanism, local).__name__}
    model_kept = without_alternatives(model_modules, [
        d for d in reachable(model_modules, model_roots, config_names) if not d.binds & config_names], config_names)
    used = set().union(*(d.uses | d.annotated for d in model_kept))
    return {
        f"{CONFIG_MODULE}.py": render(config_modules, config_kept, file_docstring(CONFIG_MODULE, attention_type), []),
        f"{family}.py": render(model_modules, model_kept, file_docstring(family, attention_type),
                               sorted(used & config_names)),
    }


def file_docstring(module: str, attention_type: str) -> str:
    """The generated file's docstring: its module's, and what it was generated from."""
    own = read_module(module).docstring or ""
    note = f"Generated by hf_effattn for a {attention_type!r} model from the modules named below: edit those."
    return f"{own}\n\n{textwrap.fill(note, width=116)}"


def write_remote_code(model, folder) -> list[str]:
    """Replace what ``save_pretrained`` copied into ``folder`` with :func:`generated_files`; returns their names."""
    folder = Path(folder)
    families = [type(model).__module__.rsplit(".", 1)[-1], CONFIG_MODULE]
    files = generated_files(model.config, list(model.auto_classes.values()))
    copied = {f"{name}.py" for name in families} | {  # what save_pretrained copied, functions' imports included
        Path(path).name for name in families for path in get_relative_import_files(MODELING / f"{name}.py")}
    for name in copied - set(files):
        (folder / name).unlink(missing_ok=True)
    for name, source in files.items():
        (folder / name).write_text(source)
    return sorted(files)
