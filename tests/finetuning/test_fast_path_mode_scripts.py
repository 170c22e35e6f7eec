"""``HF_EFFATTN_FAST_PATHS=fast`` with a fine-tuning script on a machine where none of its model's fast paths can run
(here, Kerformer on a CPU: its fast paths are CUDA's): one line and exit status 2, naming the fix, before the script
loads its tokenizer or image processor, its model or its data, and before it begins its output folder."""

from __future__ import annotations

import pytest
import transformers
from helpers.finetuning import (
    cifar_mirror, load_script, tiny_text_checkpoint, tiny_vit_checkpoint, training_options,
)
from helpers.red_team import no_data_loads  # noqa: F401 (a fixture)
from helpers.red_team import mlm_argv, text_argv, texts_file, trainer_argv

from hf_effattn.modeling import fast_paths
from hf_effattn.modeling.pretrained import EffAttnPreTrainedModel
from hf_effattn.options.user_errors import run_script

REFUSAL = ("error: The fast paths are required (HF_EFFATTN_FAST_PATHS=fast, or fast_paths('fast')), but none can run "
           "here: the tensors are on cpu, this fast path is for cuda. Set HF_EFFATTN_FAST_PATHS=auto (or unset it; in "
           "Python, fast_paths('auto')) to take the exact path where a fast path cannot run.")


def argv_of(script: str, tmp_path, out) -> list[str]:
    """A tiny run of ``script`` with Kerformer, writing to ``out``."""
    if script == "run_mlm":
        return mlm_argv(tiny_text_checkpoint(), texts_file(tmp_path / "data"), out, "--attention_type", "kerformer")
    if script == "run_text_classification":
        return text_argv(out, "--attention_type", "kerformer")
    if script == "run_image_classification":
        return ["--model_name_or_path", tiny_vit_checkpoint(), "--attention_type", "kerformer", "--dataset_name",
                cifar_mirror(10), *training_options(out)]
    return trainer_argv(out)


@pytest.fixture
def nothing_loads(monkeypatch, no_data_loads):  # noqa: F811 (the fixture)
    """Loading a tokenizer, an image processor or a model fails the test (the data: ``no_data_loads``)."""
    def loaded(*args, **kwargs):
        raise AssertionError("something was loaded before the refusal")

    for auto_class in (transformers.AutoTokenizer, transformers.AutoImageProcessor):
        monkeypatch.setattr(auto_class, "from_pretrained", loaded)
    monkeypatch.setattr(EffAttnPreTrainedModel, "from_plan", classmethod(loaded))


@pytest.mark.parametrize("script", ["run_mlm", "run_text_classification", "run_image_classification", "run_trainer"])
def test_fast_mode_where_no_fast_path_can_run_is_one_line_before_anything_loads(tmp_path, monkeypatch, capsys,
                                                                              nothing_loads, script):
    monkeypatch.setattr(fast_paths, "_mode", None)
    monkeypatch.setenv(fast_paths.ENVIRONMENT_VARIABLE, "fast")
    argv, main = argv_of(script, tmp_path, tmp_path / "out"), load_script(script).main
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit:
        run_script(lambda: main(argv))
    lines = capsys.readouterr().err.strip().splitlines()
    assert exit.value.code == 2 and len(lines) == 1 and lines[0].endswith(REFUSAL), lines
    assert not (tmp_path / "out").exists()
