"""The layout: ``modeling/`` and ``model_cards/`` sit at the top of the repository and are installed as the
subpackages ``hf_effattn.modeling`` and ``hf_effattn.model_cards``, in the editable install the README uses
and in a regular wheel install, which imports from any folder, the checkout's root included; neither can be
imported a second time under a top-level name."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import torch
from helpers.models import assert_loads_as_remote_code

import hf_effattn
from hf_effattn.model_cards import card as model_card

REPO = Path(__file__).resolve().parents[2]


def run_python(code: str, cwd: Path, python: str = sys.executable, **env_overrides) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env |= {"HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", **env_overrides}
    return subprocess.run([python, "-c", textwrap.dedent(code)], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def test_editable_install_maps_the_top_level_folders_into_the_package():
    assert Path(hf_effattn.modeling.__file__).parent == REPO / "modeling"
    assert model_card.TEMPLATE_PATH == REPO / "model_cards" / "template.md"
    assert model_card.TEMPLATE_PATH.is_file()
    assert not any(name.split(".")[0] in {"modeling", "model_cards"} for name in sys.modules)


def test_top_level_folders_refuse_a_second_import_under_another_name():
    result = run_python(
        """
        import hf_effattn
        for name in ("modeling", "modeling.attention_kerformer", "model_cards"):
            try:
                __import__(name)
            except ImportError as error:
                print(name, "refused:", error)
            else:
                raise SystemExit(f"{name} was imported a second time")
        """,
        cwd=REPO,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.count("refused:") == 3
    assert "import hf_effattn.modeling instead" in result.stdout


def venv_seeing_this_interpreter(folder: Path) -> str:
    """A fresh virtual environment in ``folder`` whose Python sees the packages this one sees (torch, transformers),
    behind its own site-packages, so that what is installed into it shadows them; returns that Python's path.

    ``venv --system-site-packages`` would not do: run from a virtual environment, it gives the new one the base
    Python's site-packages, not this environment's. So a ``.pth`` file adds every site folder on this Python's
    ``sys.path`` (a venv's, a conda environment's, the system's, the user's, one chained in by a ``.pth``) with
    ``site.addsitedir``, which also runs their own ``.pth`` files, as this Python did."""
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True, timeout=120)
    python = str(folder / "bin" / "python")
    own_site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                              check=True, capture_output=True, text=True, timeout=60).stdout.strip()
    seen = [path for path in sys.path if Path(path).name in ("site-packages", "dist-packages")]
    lines = [f"import site; site.addsitedir({path!r})" for path in seen]
    (Path(own_site) / "zz_running_python_site.pth").write_text("\n".join(lines) + "\n")
    return python


WHEEL_USER = """
    import json, sys
    from pathlib import Path
    import torch
    import hf_effattn
    from hf_effattn.model_cards import TEXT_CLASSIFICATION, CardContent, write_model_card

    assert Path(hf_effattn.__file__).is_relative_to(Path(sys.prefix)), hf_effattn.__file__
    assert Path(hf_effattn.modeling.__file__).parent == Path(hf_effattn.__file__).parent / "modeling"
    config = hf_effattn.create_config("roberta-base/kerformer", num_hidden_layers=1, hidden_size=32,
                                      num_attention_heads=2, intermediate_size=64, vocab_size=100,
                                      max_position_embeddings=40, num_labels=2)
    torch.manual_seed(0)
    model = hf_effattn.EffAttnRobertaForSequenceClassification(config).eval()
    model.save_pretrained("saved")
    card = write_model_card("saved", CardContent(
        kind=TEXT_CLASSIFICATION, repo_id="user/tiny-kerformer", attention_type="kerformer",
        attention_config=config.attention_config, base_model="FacebookAI/roberta-base", dataset_id="nyu-mll/glue",
        dataset_config="sst2", results={"validation": {"accuracy": 0.5}}, hyperparameters={"learning_rate": 1e-3}))
    assert "kerformer" in card.read_text()
    import evaluate
    from hf_effattn.metrics import metric_path

    assert Path(metric_path()).is_relative_to(Path(hf_effattn.__file__).parent), metric_path()
    glue = evaluate.load(metric_path(), "mrpc", keep_in_memory=True)
    assert glue.compute(predictions=[1, 0, 1, 1], references=[1, 0, 0, 1]) == {"accuracy": 0.75, "f1": 0.8}
    print("saved and carded")
"""

CHECKOUT_USER = """
    import sys
    from pathlib import Path

    # Only the wheel installs hf_effattn here: this interpreter's editable install, seen through the .pth file, is not.
    sys.meta_path[:] = [finder for finder in sys.meta_path if "__editable__" not in getattr(finder, "__module__", "")]
    import torch
    import hf_effattn
    from hf_effattn.model_cards import TEXT_CLASSIFICATION

    for module in (hf_effattn, hf_effattn.modeling, sys.modules["hf_effattn.model_cards"]):
        assert Path(module.__file__).is_relative_to(Path.cwd()), module.__file__
    model = hf_effattn.create_model("roberta-base/kerformer", num_hidden_layers=1, hidden_size=32,
                                    num_attention_heads=2, intermediate_size=64, vocab_size=100)
    assert model(input_ids=torch.tensor([[0, 5, 6, 2]])).last_hidden_state.shape == (1, 4, 32)
    print("imported from the checkout")
"""


def test_wheel_install_works_from_outside_the_checkout_and_from_its_root(tmp_path):
    wheel_dir, venv, source = tmp_path / "wheels", tmp_path / "venv", tmp_path / "source"
    # A copy of what the wheel is built from, so that setuptools' build/ folder never lands in the checkout.
    source.mkdir()
    for name in ("setup.cfg", "pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    for name in ("hf_effattn", "modeling", "model_cards"):
        shutil.copytree(REPO / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(wheel_dir), str(source)],
        capture_output=True, text=True, timeout=300,
    )
    assert build.returncode == 0, build.stderr[-3000:]
    (wheel,) = wheel_dir.glob("hf_effattn-*.whl")
    python = venv_seeing_this_interpreter(venv)
    install = subprocess.run([python, "-m", "pip", "install", "--quiet", "--no-deps", str(wheel)],
                             capture_output=True, text=True, timeout=300)
    assert install.returncode == 0, install.stderr[-3000:]

    work = tmp_path / "elsewhere"
    work.mkdir()
    saved = run_python(WHEEL_USER, cwd=work, python=python, HF_HOME=str(tmp_path / "hf_home"))
    assert saved.returncode == 0, saved.stderr[-3000:]
    assert "saved and carded" in saved.stdout
    copied = {p.name for p in (work / "saved").glob("*.py")}
    assert copied == {"modeling_effattn_roberta.py", "configuration_effattn.py"}  # generated from the wheel's code
    from_root = run_python(CHECKOUT_USER, cwd=source, python=python)  # the checkout's hf_effattn/ shadows the wheel
    assert from_root.returncode == 0, from_root.stderr[-3000:]
    assert "imported from the checkout" in from_root.stdout
    model = hf_effattn.EffAttnRobertaForSequenceClassification.from_pretrained(work / "saved").eval()
    inputs = {"input_ids": torch.tensor([[0, 5, 6, 7, 2]]), "attention_mask": torch.ones(1, 5, dtype=torch.long)}
    with torch.no_grad():
        logits = model(**inputs).logits
    assert_loads_as_remote_code(work / "saved", "AutoModelForSequenceClassification", inputs, logits,
                                python=python, cwd=work)
