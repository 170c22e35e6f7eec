"""``HF_EFFATTN_FAST_PATHS``: read in any case, empty for the default, and checked where the mode is first used (a
model's call), not at import, so that ``import hf_effattn`` and every command survive a bad value until a model runs;
then one line naming the variable, the value and the choices (``fast_paths.py``)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch
from helpers.models import text_config, text_inputs

import hf_effattn
from hf_effattn.commands import main as cli
from hf_effattn.modeling import fast_paths

BAD_VALUE = r"HF_EFFATTN_FAST_PATHS='turbo': choose one of auto, exact, fast \('auto' takes the fast paths on CUDA " \
            r"where they can run; unset for the default, 'exact'\)\.$"


@pytest.fixture
def environment(monkeypatch):
    """Set ``HF_EFFATTN_FAST_PATHS`` (None: unset) as at the start of a process: the mode not read yet."""
    monkeypatch.setattr(fast_paths, "_mode", None)
    monkeypatch.setattr(fast_paths, "_chosen", False)

    def set_to(value: str | None) -> None:
        if value is None:
            monkeypatch.delenv(fast_paths.ENVIRONMENT_VARIABLE, raising=False)
        else:
            monkeypatch.setenv(fast_paths.ENVIRONMENT_VARIABLE, value)

    return set_to


@pytest.mark.parametrize("value, mode, chosen", [
    ("auto", "auto", True), ("AUTO", "auto", True), (" Fast ", "fast", True), ("Exact", "exact", True),
    ("", "exact", False), ("  ", "exact", False), (None, "exact", False),
])
def test_the_variable_is_read_in_any_case_and_empty_means_the_default(environment, value, mode, chosen):
    environment(value)
    assert fast_paths.fast_path_mode() == mode
    assert fast_paths._chosen is chosen  # an empty variable is no choice: the default's hint stays on


def test_a_bad_value_stops_the_first_model_call_in_one_line_and_every_later_one(environment):
    environment("turbo")
    model = hf_effattn.EffAttnRobertaModel(text_config("kerformer")).eval()
    for _ in range(2):
        with pytest.raises(ValueError, match=BAD_VALUE):
            model(**text_inputs())


def test_a_mode_chosen_in_python_runs_whatever_the_variable_says(environment):
    environment("turbo")
    model = hf_effattn.EffAttnRobertaModel(text_config("kerformer")).eval()
    with fast_paths.fast_paths("exact"):
        model(**text_inputs())
    with pytest.raises(ValueError, match=BAD_VALUE):  # the block's mode gone, the variable is read again
        model(**text_inputs())


def test_commands_survive_a_bad_value(environment, capsys):
    environment("turbo")
    with pytest.raises(SystemExit) as exit:
        cli.main(["--version"])
    assert exit.value.code == 0 and hf_effattn.__version__ in capsys.readouterr().out


def test_importing_the_package_survives_a_bad_value_until_a_model_runs():
    script = textwrap.dedent("""
        import hf_effattn
        print("imported")
        config = hf_effattn.EffAttnRobertaConfig(hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                                 intermediate_size=32, vocab_size=40, max_position_embeddings=20)
        model = hf_effattn.EffAttnRobertaModel(config)
        try:
            model(input_ids=__import__("torch").tensor([[0, 5, 2]]))
        except ValueError as error:
            print(error)
    """)
    env = {**os.environ, fast_paths.ENVIRONMENT_VARIABLE: "turbo", "OMP_NUM_THREADS": "1"}
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    imported, error = result.stdout.strip().splitlines()
    assert imported == "imported" and error.startswith("HF_EFFATTN_FAST_PATHS='turbo': choose one of auto, exact, fast")


@pytest.mark.parametrize("mechanism, refused", [("kerformer", True), ("sdpa", True), ("psf", False)])
def test_fast_mode_is_checked_against_the_devices_of_a_mechanisms_fast_paths(mechanism, refused):
    """On a CPU only PSF has a fast path (its factors compiled); the others' are CUDA's."""
    devices = fast_paths.fast_path_devices(hf_effattn.get_attention_class(mechanism))
    assert devices == (("cuda",) if refused else ("cuda", "cpu"))
    if not refused:
        fast_paths.check_fast_paths_can_run(torch.device("cpu"), devices)
        return
    with pytest.raises(ValueError, match=r"^The fast paths are required \(HF_EFFATTN_FAST_PATHS=fast, or "
                                         r"fast_paths\('fast'\)\), but none can run here: the tensors are on cpu, this "
                                         r"fast path is for cuda\. Set HF_EFFATTN_FAST_PATHS=auto \(or unset it"):
        fast_paths.check_fast_paths_can_run(torch.device("cpu"), devices)
