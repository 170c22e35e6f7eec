"""The generator of a saved folder's remote code (``modeling/remote_code.py``), on small modules written here: what
the roots reach is kept, in the modules' order, and nothing else; annotations never pull a definition in; what a
kept module runs on import is kept; the package-only members are left out; a stand-in takes the name it stands for;
one name with two meanings, in the modules or in their imports, is refused."""

from __future__ import annotations

import ast
import textwrap

import pytest

from hf_effattn.modeling import remote_code
from hf_effattn.modeling.remote_code import closure, reachable, render

MODULES = {
    "base": '''
        """The base."""

        import math

        from .helpers import scale


        class Base:
            """A base."""

            def value(self) -> Unused:
                return scale(math.pi)


        def unused() -> None:
            pass
        ''',
    "helpers": '''
        """Helpers."""

        from typing import Any

        REGISTRY = {}


        def scale(x: Any) -> float:
            return 2 * x


        REGISTRY["scale"] = scale  # runs on import
        ''',
    "model": '''
        """The model."""

        from .base import Base


        class Model(Base):
            def from_pretrained(self):
                return never_called()

            def forward(self):
                from .kernels import fast
                return fast(self.value())
        ''',
}


def write(folder, modules: dict[str, str]) -> None:
    for name, source in modules.items():
        (folder / f"{name}.py").write_text(textwrap.dedent(source).lstrip())


def test_what_the_roots_reach_is_kept_in_the_modules_order(tmp_path):
    write(tmp_path, MODULES)
    modules = closure(["model"], tmp_path)
    assert [module.name for module in modules] == ["helpers", "base", "model"]
    kept = reachable(modules, {"Model"})
    assert [sorted(d.binds) or "runs on import" for d in kept] == [
        ["REGISTRY"], ["scale"], "runs on import", ["Base"], ["Model"]]
    source = render(modules, kept, "A model.", [])
    ast.parse(source)
    assert "def unused" not in source and "class Unused" not in source  # not reached; an annotation pulls nothing
    assert "from typing import Any" in source and "import math" in source  # imports the kept code names
    assert "from_pretrained" not in source and "never_called" not in source  # package-only: left out
    assert "# From helpers.py" in source


def test_a_package_only_method_can_keep_a_one_line_body(tmp_path, monkeypatch):
    monkeypatch.setitem(remote_code.PACKAGE_ONLY, "Base.value", "return 0  # the generated code's own")
    write(tmp_path, MODULES)
    modules = closure(["base"], tmp_path)
    source = render(modules, reachable(modules, {"Base"}), "A base.", [])
    assert "def value(self) -> Unused:\n        return 0  # the generated code's own\n" in source
    assert "def scale" not in source  # the body that used it is gone


def test_one_name_with_two_meanings_is_refused(tmp_path):
    write(tmp_path, {**MODULES, "base": MODULES["base"].replace("def unused()", "def scale()")})
    with pytest.raises(ValueError, match=r"scale is defined in both helpers.py and base.py: .* rename one"):
        reachable(closure(["model"], tmp_path), {"Model"})
    helpers = MODULES["helpers"].replace("from typing", "import math\n        from typing")
    helpers = helpers.replace("2 * x", "math.e * x")
    write(tmp_path, {**MODULES, "base": MODULES["base"].replace("import math", "import cmath as math"),
                     "helpers": helpers})
    modules = closure(["model"], tmp_path)
    with pytest.raises(ValueError, match=r"math names both .*cmath.* import one under another name"):
        render(modules, reachable(modules, {"Model"}), "A model.", [])


def test_a_package_only_class_attribute_is_left_out_with_its_comment(tmp_path, monkeypatch):
    monkeypatch.setitem(remote_code.PACKAGE_ONLY, "*.citation", None)
    modules = dict(MODULES, base=MODULES["base"].replace('''            """A base."""
''', '''            """A base."""

            # what the cards read
            citation = "@article{...}"
            kept = 1
'''))
    write(tmp_path, modules)
    modules = closure(["base"], tmp_path)
    source = render(modules, reachable(modules, {"Base"}), "A base.", [])
    assert "citation" not in source and "cards" not in source and "kept = 1" in source


def test_a_substitute_takes_the_name_of_the_function_it_stands_for(tmp_path):
    """A model without a local part holds ``without_local_part`` as ``local_part_settings``
    (``WITHOUT_LOCAL_PART``)."""
    helpers = MODULES["helpers"].replace("REGISTRY[", "def doubled(x):\n            return x + x\n\n\n        REGISTRY[")
    write(tmp_path, {**MODULES, "helpers": helpers})
    modules = remote_code.substituted(closure(["base"], tmp_path), {"scale": "doubled"})
    source = render(modules, reachable(modules, {"Base"}), "A base.", [])
    assert "def scale(x):\n    return x + x\n" in source and "2 * x" not in source and "doubled" not in source
