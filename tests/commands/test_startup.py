"""A start-up in a fraction of a second, checked by what it imports (the times are ``benchmarks/startup.py``'s):
``hf-effattn --version``, ``--help``, an argument error, and every subcommand's ``--help`` and argument errors import
neither PyTorch nor Transformers, nor does ``import hf_effattn``; the names and defaults the subcommands' parsers
offer instead (``hf_effattn.options.parser_values``) are their sources'; every name of the package still resolves,
and ``AutoConfig`` / ``AutoModel`` know the package's model types after ``import hf_effattn``, whichever of the two is
imported first."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch
import transformers

import hf_effattn
from hf_effattn.benchmark import BenchmarkSettings, options as bench_options, peers
from hf_effattn.commands import bench, main as cli
from hf_effattn.conversion import transfer
from hf_effattn.evaluation import retrieval
from hf_effattn.modeling import modeling_effattn_roberta, modeling_effattn_vit
from hf_effattn.models import hybrid_parts, model_classes
from hf_effattn.options import parser_values
from hf_effattn.synthetic_tasks import model as task_model, training as task_training
from helpers.models import text_config

HEAVY = ["torch", "transformers"]
REPORT = "import json, sys; print(json.dumps(sorted(m for m in {heavy} if m in sys.modules)))".format(heavy=HEAVY)


def fresh_python(code: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=cwd)


def heavy_modules_after(code: str) -> list[str]:
    """Which of :data:`HEAVY` a fresh process has imported after running ``code``."""
    result = fresh_python(f"{code}\n{REPORT}")
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.splitlines()[-1])


SUBCOMMAND_ANSWERS = [  # every subcommand's --help and an unknown option; a missing argument, bad choices, a bad value
    *(([name, "--help"], 0) for name in cli.SUBCOMMANDS), *(([name, "--frobnicate"], 2) for name in cli.SUBCOMMANDS),
    (["convert"], 2), (["convert", "folder", "--output_dir", "out", "--attention_type", "nope"], 2),
    (["train-task", "adding", "--attention", "nope"], 2), (["bench", "--lengths", "x"], 2),
]


@pytest.mark.parametrize("argv, status", [(["--version"], 0), (["--help"], 0), (["frobnicate"], 2), ([], 2),
                                          (["--frobnicate", "list"], 2), *SUBCOMMAND_ANSWERS])
def test_the_command_answers_without_importing_torch_or_transformers(argv, status):
    code = ("from hf_effattn.commands.main import main\n"
            f"try:\n    main({argv!r})\nexcept SystemExit as exit:\n    assert exit.code == {status}, exit.code")
    assert heavy_modules_after(code) == []


def test_the_version_line_names_the_installed_versions(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--version"])
    assert capsys.readouterr().out == (f"hf-effattn {hf_effattn.__version__} (transformers {transformers.__version__}, "
                                       f"torch {torch.__version__})\n")


def test_a_subcommand_gets_its_options_and_the_documented_parser_has_every_subcommands():
    assert cli.named_subcommand(["--debug", "convert", "list"]) == ["convert"]
    assert cli.named_subcommand(["--debug"]) == cli.named_subcommand(["frobnicate"]) == []
    args = cli.build_parser(["convert"]).parse_args(["convert", "folder", "--output_dir", "out"])
    assert args.checkpoint == "folder" and args.module == "hf_effattn.commands.convert"
    full = cli.build_parser()  # every subcommand's options, as docs/cli.md shows them
    assert full.parse_args(["list", "psf", "--models"]).models
    assert full.parse_args(["convert", "folder", "--output_dir", "out"]).checkpoint == "folder"


def test_the_parsers_names_are_their_sources():
    assert parser_values.ATTENTIONS == tuple(hf_effattn.list_attentions())
    assert parser_values.TASKS == tuple(model_classes.all_tasks())
    assert (parser_values.TRAINABLE, parser_values.MODEL_LENGTH) == (transfer.TRAINABLE, transfer.MODEL_LENGTH)
    assert parser_values.MECHANISM_WEIGHT_LEARNING_RATE == hybrid_parts.MECHANISM_WEIGHT_LEARNING_RATE
    assert parser_values.BENCH_PARTS == bench_options.PARTS
    assert parser_values.BENCH_DTYPES == tuple(bench_options.DTYPES)
    assert parser_values.BENCH_PEERS == tuple(peers.PEERS)
    assert parser_values.SYNTHETIC_TASKS == tuple(task_training.TASKS)
    assert (parser_values.POOLINGS, parser_values.NORM_STYLES) == (task_model.POOLINGS, tuple(task_model.NORM_STYLES))
    assert parser_values.PASSAGE_LENGTH == retrieval.PASSAGE_LENGTH


def test_bench_without_options_measures_the_benchmarks_default_settings():
    args = cli.build_parser(["bench"]).parse_args(["bench"])
    assert BenchmarkSettings(**bench.settings_of(args)) == BenchmarkSettings()


def test_import_hf_effattn_imports_neither_and_every_name_resolves():
    assert heavy_modules_after("import hf_effattn") == []
    assert all(getattr(hf_effattn, name) is not None for name in hf_effattn.__all__)
    assert set(hf_effattn.__all__) <= set(dir(hf_effattn))
    assert hf_effattn.EffAttnRobertaModel is modeling_effattn_roberta.EffAttnRobertaModel
    assert callable(hf_effattn.convert) and hf_effattn.models.presets.list_models is hf_effattn.list_models
    with pytest.raises(AttributeError, match="module 'hf_effattn' has no attribute 'EffAttnRobertaModle'"):
        hf_effattn.EffAttnRobertaModle


def test_the_auto_class_names_are_the_modeling_files_auto_classes():
    for module, model_type in ((modeling_effattn_roberta, "effattn_roberta"), (modeling_effattn_vit, "effattn_vit")):
        config_name, auto_classes = hf_effattn.AUTO_CLASS_NAMES[model_type]
        assert {auto_class: model.__name__ for auto_class, model in module.AUTO_CLASSES.items()} == auto_classes
        assert next(iter(module.AUTO_CLASSES.values())).config_class.__name__ == config_name


@pytest.mark.parametrize("first", ["import hf_effattn\nimport transformers",
                                   "import transformers\nfrom transformers import AutoModel\nimport hf_effattn"])
def test_auto_classes_load_the_packages_models_after_import_hf_effattn(first, tmp_path):
    """In a fresh process, ``AutoConfig`` and ``AutoModel*`` load a saved folder as the package's classes (no remote
    code): registered whether Transformers' auto modules are imported after the package or before it."""
    hf_effattn.EffAttnRobertaForMaskedLM(text_config("dba")).save_pretrained(tmp_path / "saved")
    code = (f"{first}\nimport sys\n"
            "assert 'transformers.modeling_utils' not in sys.modules\n"
            f"config = transformers.AutoConfig.from_pretrained({str(tmp_path / 'saved')!r})\n"
            f"model = transformers.AutoModelForMaskedLM.from_pretrained({str(tmp_path / 'saved')!r})\n"
            "print(type(config).__module__, type(config).__name__, type(model).__module__, type(model).__name__)")
    result = fresh_python(code, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["hf_effattn.modeling.configuration_effattn", "EffAttnRobertaConfig",
                                     "hf_effattn.modeling.modeling_effattn_roberta", "EffAttnRobertaForMaskedLM"]
