"""The ``Auto*`` classes: importing ``hf_effattn`` registers every head with its Auto class, and saved folders
are Hub-ready: for every mechanism, a text and an image model saved with ``save_pretrained`` load through
the ``Auto*`` classes with ``trust_remote_code=True`` in a fresh Python process where ``hf_effattn`` cannot
be imported, offline, and give the same outputs."""

from __future__ import annotations

import ast
import builtins
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
import transformers
from transformers.dynamic_module_utils import get_relative_import_files

import hf_effattn
from hf_effattn.modeling.attentions import get_attention_class
from hf_effattn.modeling.local_settings import WITH_THE_PACKAGE
from hf_effattn.modeling.remote_code import generated_files
from hf_effattn.modeling.modeling_effattn_roberta import AUTO_CLASSES as TEXT_AUTO_CLASSES
from hf_effattn.modeling.modeling_effattn_vit import AUTO_CLASSES as VISION_AUTO_CLASSES
from helpers.models import BLOCK_PACKAGE, HYBRIDS, MECHANISMS, pixel_values, text_config, text_inputs, vision_config

LOADER = BLOCK_PACKAGE + textwrap.dedent(
    """
    import copy
    import json
    from pathlib import Path

    import torch
    from transformers import AutoModel, AutoModelForImageClassification, AutoModelForSequenceClassification
    from transformers.dynamic_module_utils import check_imports

    auto_classes = {"text": AutoModelForSequenceClassification, "vision": AutoModelForImageClassification}
    for folder, family in json.load(open("folders.json")).items():
        for code in Path(folder).glob("*.py"):  # what loading from the Hub checks of every file (a local folder: one)
            check_imports(code)
        case = torch.load(f"{folder}/case.pt")
        for auto_class in (auto_classes[family], AutoModel):
            model = auto_class.from_pretrained(folder, trust_remote_code=True).eval()
            assert type(model).__module__.startswith("transformers_modules."), type(model).__module__
            with torch.no_grad():
                output = model(**case["inputs"])
            expected = case["logits"] if auto_class is not AutoModel else case["last_hidden_state"]
            actual = output.logits if auto_class is not AutoModel else output.last_hidden_state
            torch.testing.assert_close(actual, expected, atol=1e-5, rtol=1e-5, msg=folder)
        with torch.no_grad():  # its hybrid classes, built at run time, deep-copy as any module's (PEFT, EMA)
            twin = copy.deepcopy(model)(**case["inputs"]).last_hidden_state
        torch.testing.assert_close(twin, case["last_hidden_state"], atol=1e-5, rtol=1e-5, msg=folder)
        print("loaded", folder)
    model.save_pretrained("saved-again")  # a folder's code saves the model as Transformers does, loadable again
    again = AutoModel.from_pretrained("saved-again", trust_remote_code=True).eval()
    assert sorted(path.name for path in Path("saved-again").glob("*.py")) == sorted(
        path.name for path in Path(folder).glob("*.py"))
    with torch.no_grad():
        torch.testing.assert_close(again(**case["inputs"]).last_hidden_state, case["last_hidden_state"])
    assert not any(name.startswith("hf_effattn") for name in sys.modules)
    """
)


def save_case(model, folder, inputs) -> None:
    """Save ``model`` and, beside it, the inputs and the outputs the reloaded model must reproduce."""
    model.eval().save_pretrained(folder)
    with torch.no_grad():
        logits = model(**inputs).logits
        last_hidden_state = model.base_model(**inputs).last_hidden_state
    torch.save({"inputs": inputs, "logits": logits, "last_hidden_state": last_hidden_state}, folder / "case.pt")


def test_every_mechanism_loads_as_remote_code_without_the_package(tmp_path):
    folders = {}
    for attention_type in MECHANISMS + HYBRIDS:
        torch.manual_seed(0)
        text = hf_effattn.EffAttnRobertaForSequenceClassification(text_config(attention_type, num_labels=3))
        save_case(text, tmp_path / f"text-{attention_type}", text_inputs())
        vision = hf_effattn.EffAttnViTForImageClassification(vision_config(attention_type, num_labels=3))
        save_case(vision, tmp_path / f"vision-{attention_type}", {"pixel_values": pixel_values()})
        folders |= {f"text-{attention_type}": "text", f"vision-{attention_type}": "vision"}
    config = json.loads((tmp_path / "text-psf" / "config.json").read_text())
    assert set(config["auto_map"]) == {"AutoConfig", *TEXT_AUTO_CLASSES}
    assert (tmp_path / "text-psf" / "model.safetensors").exists()
    (tmp_path / "folders.json").write_text(json.dumps(folders))

    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env |= {"HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf_home"), "OMP_NUM_THREADS": "1"}
    result = subprocess.run(
        [sys.executable, "-I", "-c", LOADER], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert result.stdout.count("loaded") == len(folders)


REGISTRIES_IN_THE_FOLDERS = BLOCK_PACKAGE + textwrap.dedent(
    """
    from transformers import AutoModel

    for folder in sys.argv[1:]:
        model = AutoModel.from_pretrained(folder, trust_remote_code=True)
        print(list(sys.modules[type(model).__module__]._REGISTRY))  # the registry of the generated file
    try:  # a folder's code without a local part has none to build: one is refused in one line
        AutoModel.from_pretrained(next(folder for folder in sys.argv[1:] if folder.endswith("dba")),
                                  trust_remote_code=True, local_window=4)
    except ValueError as error:
        print(error)
    """
)


def remote_code_files(folder) -> dict[str, str]:
    return {path.name: path.read_text() for path in folder.glob("*.py")}


LOCAL_PART_CLASSES = ("LocalPart", "LocalWindow", "LocalBlocks", "HybridAttention", "SharedNormaliserAttention",
                      "SharedNormaliserBesideWindow", "SharedNormaliserBesideBlocks")
SHARED = {"HybridAttention", "SharedNormaliserAttention"}  # the bases of a composition under one normaliser


def local_part_classes(code: str) -> set[str]:
    """The classes of the local part and its compositions that generated ``code`` defines."""
    return {name for name in LOCAL_PART_CLASSES if f"class {name}(" in code}


@pytest.mark.parametrize("local_part, expected", [
    ({"local_block": 4}, {"LocalPart", "LocalBlocks", "HybridAttention"}),
    ({"local_block": 4, "shared_normaliser": True}, {"LocalPart", "LocalBlocks", "SharedNormaliserBesideBlocks",
                                                     *SHARED}),
    ({"local_window": 4, "shared_normaliser": False}, {"LocalPart", "LocalWindow", "HybridAttention"}),
], ids=["blocks-mixed", "blocks-shared", "window-mixed"])
def test_a_folder_carries_the_code_of_its_own_local_part_only(tmp_path, local_part, expected):
    model = hf_effattn.EffAttnRobertaModel(text_config("kerformer", **local_part))
    model.save_pretrained(tmp_path)
    files = remote_code_files(tmp_path)
    assert local_part_classes("".join(files.values())) == expected


def test_a_saved_folder_carries_one_configuration_and_one_modeling_file(tmp_path):
    """Generated for the model (``modeling/remote_code.py``): no other mechanism's code, and nothing of the package's
    own machinery (loading other architectures, extending, the fast paths, writing this code). All that Transformers
    reads to load the folder, and nothing more; the folder loads as remote code (the test above, for every mechanism
    and hybrid) with a registry of its mechanism only."""
    cases = {"dba": {}, "sdpa": {}, "kerformer": {"local_window": 4}, "psf": {}}
    for attention_type, settings in cases.items():
        model = hf_effattn.EffAttnRobertaModel(text_config(attention_type, attention_config=settings))
        model.save_pretrained(tmp_path / attention_type)
        files = remote_code_files(tmp_path / attention_type)
        entries = {"configuration_effattn.py", "modeling_effattn_roberta.py"}  # the files auto_map names
        assert set(files) == entries  # PSF's too: its Triton kernels are the package's fast path
        loaded = {Path(file).name for entry in entries
                  for file in get_relative_import_files(tmp_path / attention_type / entry)}
        assert loaded == {"configuration_effattn.py"}
        code = "".join(files[name] for name in entries)
        own = get_attention_class(attention_type)
        assert f"class {own.__name__}(" in code
        others = {get_attention_class(name) for name in hf_effattn.list_attentions()} - set(own.__mro__)
        assert not [other for other in others if f"class {other.__name__}(" in code]
        assert not [name for name in ("def plan_load", "def from_plan", "def extend_max_length", "def generated_files",
                                      "def log_loading_report", "def takes_fast_path", "def run_fast", "citation =")
                    if name in code]
        assert local_part_classes(code) == ({"LocalPart", "LocalWindow", "SharedNormaliserBesideWindow", *SHARED}
                                            if settings else set())  # a kerformer window: under one normaliser
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {
        "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf_home"), "OMP_NUM_THREADS": "1"}
    result = subprocess.run([sys.executable, "-I", "-c", REGISTRIES_IN_THE_FOLDERS,
                             *(str(tmp_path / attention_type) for attention_type in cases)],
                            env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    registries = {"dba": ["dba"], "sdpa": ["eager", "sdpa"], "kerformer": ["kerformer"], "psf": ["psf"]}  # sdpa: a
    lines = result.stdout.splitlines()[-len(cases) - 1:]  # subclass of eager
    assert lines[:len(cases)] == [str(registries[name]) for name in cases]
    assert lines[-1] == (f"This model's code has no local part, so local_window=4 cannot be set: {WITH_THE_PACKAGE}")




def test_a_local_part_whose_code_is_not_registered_is_refused_in_one_line(monkeypatch):
    """A Hub folder's code registers its own local part and composition only (the package registers them all)."""
    from hf_effattn.modeling import attention_registry

    monkeypatch.delitem(attention_registry._COMPOSITIONS, ("shared", "blocks"))
    message = (f"This model's code cannot build a blocks local part under its normaliser: a Hub folder's code holds "
               f"the one it was saved with only. {WITH_THE_PACKAGE}")
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        hf_effattn.EffAttnRobertaModel(text_config("kerformer", local_block=4, shared_normaliser=True))


def folder_code_size(model, folder) -> int:
    model.save_pretrained(folder)
    return sum(len(path.read_text()) for path in folder.glob("*.py"))


def test_a_folders_code_is_short_enough_to_read_before_trusting_it(tmp_path):
    """A converted Kerformer RoBERTa's two files hold at most 70,000 characters (Transformers' own
    ``modeling_roberta.py`` is about 70,000), a Kerformer block hybrid's at most 80,000."""
    kerformer = hf_effattn.EffAttnRobertaForMaskedLM(text_config("kerformer"))
    assert folder_code_size(kerformer, tmp_path / "kerformer") <= 70_000
    block_hybrid = hf_effattn.EffAttnRobertaForMaskedLM(text_config("kerformer", local_block=4))
    assert folder_code_size(block_hybrid, tmp_path / "block-hybrid") <= 80_000


def undefined_names(source: str) -> set[str]:
    """The names that ``source``'s code or annotations read at module level or below, which the file neither defines,
    imports nor gets from Python (a linter's "undefined name")."""
    tree = ast.parse(source)
    defined = set(dir(builtins)) | {"__name__", "__file__"}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            defined.add(node.name)
            defined |= {arg.arg for arg in ast.walk(node) if isinstance(arg, ast.arg)}
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            defined.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            defined |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
        elif isinstance(node, (ast.comprehension, ast.ExceptHandler)) and getattr(node, "name", None):
            defined.add(node.name)
    read = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)}
    return read - defined


@pytest.mark.parametrize("config", [
    *[{"attention_type": name} for name in MECHANISMS],
    {"attention_type": "kerformer", "local_block": 4},
    {"attention_type": "dba", "local_window": 4, "global_tokens": 1},
], ids=str)
def test_a_folders_code_names_nothing_it_does_not_define(config):
    """Every name a folder's two files read, annotations included, is defined there or imported: a folder without a
    local part has no ``LocalPartSettings``, so its annotations lose that alternative (``LocalPartSettings | None`` is
    None there)."""
    for family_config, model_class in ((text_config, hf_effattn.EffAttnRobertaModel),
                                       (vision_config, hf_effattn.EffAttnViTModel)):
        files = generated_files(family_config(**config), list(model_class.auto_classes.values()))
        for name, source in files.items():
            assert undefined_names(source) == set(), name


def test_a_push_from_save_pretrained_uploads_the_generated_code(tmp_path, monkeypatch):
    """``save_pretrained(..., push_to_hub=True)`` uploads before it returns: the upload already holds the generated
    files (the Hub is replaced by recorders of what would be created and uploaded)."""
    from types import SimpleNamespace

    import transformers.modeling_utils
    from transformers.utils.hub import PushToHubMixin

    uploaded = {}
    monkeypatch.setattr(transformers.modeling_utils, "hf_api", lambda: SimpleNamespace(
        create_repo=lambda repo_id, **kwargs: SimpleNamespace(repo_id=f"user/{repo_id}")))
    monkeypatch.setattr(transformers.modeling_utils, "create_and_tag_model_card",
                        lambda *args, **kwargs: SimpleNamespace(save=lambda path: None))
    monkeypatch.setattr(PushToHubMixin, "_upload_modified_files", lambda self, folder, repo_id, *args, **kwargs:
                        uploaded.update({repo_id: remote_code_files(Path(folder))}))
    hf_effattn.EffAttnRobertaModel(text_config("dba")).save_pretrained(tmp_path / "dba", push_to_hub=True)
    assert uploaded == {"user/dba": remote_code_files(tmp_path / "dba")}
    assert set(uploaded["user/dba"]) == {"configuration_effattn.py", "modeling_effattn_roberta.py"}


@pytest.mark.parametrize("config, auto_classes", [
    (text_config("dba"), TEXT_AUTO_CLASSES), (vision_config("psf"), VISION_AUTO_CLASSES),
], ids=["text", "vision"])
def test_import_registers_every_head_with_its_auto_class(config, auto_classes):
    assert type(transformers.AutoConfig.for_model(config.model_type)) is type(config)
    for auto_class, model_class in auto_classes.items():
        assert type(getattr(transformers, auto_class).from_config(config)) is model_class


OLD_TRANSFORMERS = BLOCK_PACKAGE + textwrap.dedent(
    """
    import transformers
    from transformers.dynamic_module_utils import get_class_from_dynamic_module

    transformers.__version__ = "4.57.1"  # as an older installation reports itself
    text, vision = sys.argv[1:]
    # The config (read first by every Auto class), and each model file alone, as a tool that skips the config would.
    for load in (lambda: transformers.AutoConfig.from_pretrained(text, trust_remote_code=True),
                 lambda: get_class_from_dynamic_module("modeling_effattn_roberta.EffAttnRobertaModel", text),
                 lambda: get_class_from_dynamic_module("modeling_effattn_vit.EffAttnViTModel", vision)):
        try:
            load()
        except ImportError as error:
            print(error)
    """
)


def test_remote_code_on_an_older_transformers_names_the_version_it_needs(tmp_path):
    hf_effattn.EffAttnRobertaModel(text_config("kerformer")).save_pretrained(tmp_path / "text")
    hf_effattn.EffAttnViTModel(vision_config("dba")).save_pretrained(tmp_path / "vision")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {
        "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf_home")}
    result = subprocess.run([sys.executable, "-c", OLD_TRANSFORMERS, str(tmp_path / "text"), str(tmp_path / "vision")],
                            env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.splitlines() == 3 * [
        "This efficient-attention model (hf_effattn) needs Transformers >=5.20,<6, but Transformers 4.57.1 is "
        'installed: run `pip install -U "transformers>=5.20,<6"`.']


def test_supported_versions_are_the_packages_requirements():
    from configparser import ConfigParser
    from pathlib import Path

    from hf_effattn.modeling.supported_versions import SUPPORTED_TORCH, SUPPORTED_TRANSFORMERS

    setup = ConfigParser()
    setup.read(Path(__file__).resolve().parents[2] / "setup.cfg")
    requirements = setup["options"]["install_requires"].split()
    assert f"transformers{SUPPORTED_TRANSFORMERS}" in requirements and f"torch{SUPPORTED_TORCH}" in requirements


def test_saving_the_model_keeps_the_tokenizers_code_in_the_folder(tmp_path):
    """A framed tokenizer saved first (``tokenization_effattn.py``, a file of the model code that no model imports)
    stays when the model is saved into the same folder: only what the model's save copied is replaced."""
    tokenizer_code = tmp_path / "tokenization_effattn.py"
    tokenizer_code.write_text("# the tokenizer's\n")
    hf_effattn.EffAttnRobertaModel(text_config("kerformer")).save_pretrained(tmp_path)
    assert tokenizer_code.read_text() == "# the tokenizer's\n"
    assert set(remote_code_files(tmp_path)) == {"configuration_effattn.py", "modeling_effattn_roberta.py",
                                                "tokenization_effattn.py"}
