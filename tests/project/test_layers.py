"""The architecture's import rule (docs/architecture.md, "The layers"), read from the source with ``ast``: every
module of the package belongs to one layer, imports (at the top or inside a function, relative or absolute) only
its own layer and the ones below, counting the packages an import runs on the way; nothing imports the package's
``__init__``, the surface; a subpackage's ``__init__`` imports only its own modules; and no imports form a cycle."""

from __future__ import annotations

import ast
import configparser
import fnmatch
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ROOT = "hf_effattn"

# Bottom to top; a module is in the first layer one of whose patterns (fnmatch) matches its name.
LAYERS = {
    "mechanisms": ["hf_effattn.modeling", "hf_effattn.modeling.attention_*", "hf_effattn.modeling.attentions",
                   "hf_effattn.modeling.kernel_attention", "hf_effattn.modeling.masking",
                   "hf_effattn.modeling.settings", "hf_effattn.modeling.position_extension",
                   "hf_effattn.modeling.local_*", "hf_effattn.modeling.hybrid_attention",
                   "hf_effattn.modeling.shared_normaliser",
                   "hf_effattn.modeling.fast_paths", "hf_effattn.modeling.chord_kernels",
                   "hf_effattn.modeling.chord_mixes", "hf_effattn.modeling.ops_*"],
    "encoder": ["hf_effattn.modeling.encoder", "hf_effattn.modeling.outputs"],
    "models": ["hf_effattn.modeling.*"],
    "foundations": ["hf_effattn.version", "hf_effattn.options", "hf_effattn.options.*", "hf_effattn.folders",
                    "hf_effattn.folders.*", "hf_effattn.models", "hf_effattn.models.*", "hf_effattn.block_tokens",
                    "hf_effattn.metrics", "hf_effattn.metrics.*", "hf_effattn.model_cards", "hf_effattn.model_cards.*"],
    "conversion, benchmark, synthetic tasks": ["hf_effattn.conversion", "hf_effattn.conversion.*",
                                               "hf_effattn.benchmark", "hf_effattn.benchmark.*",
                                               "hf_effattn.synthetic_tasks", "hf_effattn.synthetic_tasks.*",
                                               "hf_effattn.evaluation", "hf_effattn.evaluation.*"],
    "fine-tuning": ["hf_effattn.finetuning", "hf_effattn.finetuning.*"],
    "surface": ["hf_effattn", "hf_effattn.commands", "hf_effattn.commands.*"],
}
LEVELS = list(LAYERS)


def source_folders() -> dict[str, Path]:
    """Package name -> its folder: the package itself and the top-level folders ``setup.cfg`` maps into it."""
    setup = configparser.ConfigParser()
    setup.read(REPO / "setup.cfg")
    mapped = dict(line.split(" = ") for line in setup["options"]["package_dir"].strip().splitlines())
    return {ROOT: REPO / ROOT, **{name: REPO / folder for name, folder in mapped.items()}}


def package_modules() -> dict[str, Path]:
    """Every module of the package, by dotted name (a package by its ``__init__.py``), with its file."""
    modules = {}
    for package, folder in source_folders().items():
        for path in folder.rglob("*.py"):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            name = ".".join([package, *parts])
            if not any(name.startswith(f"{other}.") for other in source_folders() if len(other) > len(package)):
                modules[name] = path
    return modules


MODULES = package_modules()


def layer_of(module: str) -> int:
    for level, patterns in enumerate(LAYERS.values()):
        if any(fnmatch.fnmatchcase(module, pattern) for pattern in patterns):
            return level
    raise AssertionError(f"{module} is in no layer: add it to LAYERS here and to docs/architecture.md")


def is_package(module: str) -> bool:
    return MODULES[module].name == "__init__.py"


def imported_modules(module: str) -> set[str]:
    """The package's modules that ``module`` imports by name, anywhere in its file (``from .pkg import name``
    imports ``pkg.name`` when that is a module, else ``pkg``)."""
    tree = ast.parse(MODULES[module].read_text())
    base = module if is_package(module) else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = base.rsplit(".", node.level - 1)[0] if node.level > 1 else base
                target = f"{anchor}.{node.module}" if node.module else anchor
            else:
                target = node.module
            for alias in node.names:
                found.add(f"{target}.{alias.name}" if f"{target}.{alias.name}" in MODULES else target)
    return {name for name in found if name in MODULES}


def with_packages(module: str) -> set[str]:
    """``module`` and the packages that importing it runs first, below the package's own ``__init__``."""
    parts = module.split(".")
    return {".".join(parts[:end]) for end in range(2, len(parts) + 1)} & MODULES.keys()


IMPORTS = {module: imported_modules(module) for module in MODULES}


def test_the_modules_are_found_and_each_is_in_a_layer():
    assert {"hf_effattn", "hf_effattn.modeling.attention_base", "hf_effattn.model_cards.card",
            "hf_effattn.conversion.transfer.teacher", "hf_effattn.commands.main"} <= MODULES.keys()
    assert {layer_of(module) for module in MODULES} == set(range(len(LAYERS)))  # every layer holds a module


def test_a_module_imports_only_its_layer_and_the_ones_below():
    upward = sorted(f"{module} ({LEVELS[layer_of(module)]}) -> {target} ({LEVELS[layer_of(target)]})"
                    for module, imports in IMPORTS.items() for imported in imports
                    for target in with_packages(imported) if layer_of(target) > layer_of(module))
    assert not upward, "imports of a higher layer:\n" + "\n".join(upward)


def test_the_tools_do_not_import_each_other():
    """Conversion, the benchmark and the synthetic tasks share a layer and nothing else."""
    tools = LEVELS.index("conversion, benchmark, synthetic tasks")
    room = lambda module: module.split(".")[1]  # noqa: E731
    for module in (module for module in MODULES if layer_of(module) == tools):
        others = sorted(name for name in IMPORTS[module] if layer_of(name) == tools and room(name) != room(module))
        assert not others, f"{module} imports another tool: {others}"


def test_nothing_imports_the_package_surface():
    """The package's ``__init__`` imports every layer (and registers the Auto classes): a module that imported it
    back would import itself through it."""
    importers = sorted(module for module, imports in IMPORTS.items() if ROOT in imports)
    assert not importers, f"these modules import the package's __init__: {importers}"


def test_a_subpackages_init_imports_only_its_own_modules():
    """Importing any module of a subpackage runs its ``__init__`` first: it must not reach into other rooms."""
    for package in (module for module in MODULES if is_package(module) and module != ROOT):
        strangers = sorted(name for name in IMPORTS[package] if not name.startswith(f"{package}."))
        assert not strangers, f"{package}/__init__ imports {strangers}"


def assert_no_cycle(imports: dict[str, set[str]]) -> None:
    """Depth-first search of the import graph ``imports`` (module -> the modules it imports): no module reaches
    itself."""
    state: dict[str, str] = {}

    def visit(module: str, path: list[str]) -> None:
        state[module] = "open"
        for target in sorted(imports[module] - {module}):
            assert state.get(target) != "open", f"an import cycle: {' -> '.join([*path, module, target])}"
            if target not in state:
                visit(target, [*path, module])
        state[module] = "done"

    for module in sorted(imports):
        if module not in state:
            visit(module, [])


def test_no_imports_form_a_cycle():
    """Imports inside functions included."""
    assert_no_cycle(IMPORTS)


def study_imports(folder: Path) -> dict[str, set[str]]:
    """A study's scripts (``research/<study>/*.py``, which import each other by their file's name) -> the scripts
    each imports, anywhere in its file."""
    scripts = {path.stem: path for path in folder.glob("*.py")}
    found = {}
    for name, path in scripts.items():
        nodes = list(ast.walk(ast.parse(path.read_text(encoding="utf-8"))))
        found[name] = ({alias.name for node in nodes if isinstance(node, ast.Import) for alias in node.names}
                       | {node.module for node in nodes if isinstance(node, ast.ImportFrom) and not node.level})
    return {name: imported & scripts.keys() for name, imported in found.items()}


STUDIES = sorted(path for path in (REPO / "research").iterdir() if path.is_dir())


def test_no_study_s_scripts_import_in_a_cycle():
    assert "pieces" in study_imports(REPO / "research" / "long_documents")["pretrain"]  # the checker sees them
    for folder in STUDIES:
        assert_no_cycle(study_imports(folder))


def test_the_checker_sees_imports_inside_functions_and_relative_imports():
    """The rule is only as good as the parser: the card's module-level imports, and the package's
    function-level ones, are found."""
    assert {"hf_effattn.models.model_classes", "hf_effattn.models.presets", "hf_effattn.model_cards.source_card",
            "hf_effattn.version"} <= IMPORTS["hf_effattn.model_cards.card"]
    assert "hf_effattn.conversion.transfer.data" in IMPORTS["hf_effattn.conversion.convert"]  # inside a function
    assert "hf_effattn.models.model_classes" in IMPORTS["hf_effattn.finetuning.models"]  # inside a function
    assert "hf_effattn.modeling.attentions" in IMPORTS["hf_effattn.models.presets"]  # ``from .modeling.attentions import``
