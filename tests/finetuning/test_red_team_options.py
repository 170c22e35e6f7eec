"""Red team, options and settings: what can be refused is refused before anything loads, trains or is written; one
answer per setting, in Python as on the command line; no raw traceback for a user's error. Tried as a hostile but
realistic user would, with ``hf-effattn convert``, the scripts and the Python API on tiny checkpoints.

Each case states the command, the one-line refusal or the right result, and that what the command read is
byte-for-byte unchanged (and no output folder was begun). The numerics case, ``linear`` in float16 on 1,000 tokens of
the real MiniLM, is with the mixed-precision tests (``tests/mechanisms/test_mixed_precision.py``).
"""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import pytest
import torch
import transformers
from helpers.finetuning import one_torch_thread  # noqa: F401 (autouse: one torch thread)
from helpers.finetuning import REPO, load_script, tiny_text_checkpoint, tiny_vit_checkpoint
from helpers.red_team import no_data_loads  # noqa: F401 (a fixture)
from helpers.red_team import cli_refused, mlm_argv, refused, run_mlm, texts_file, trainer_argv

import hf_effattn
from hf_effattn.modeling.hybrid_attention import HybridAttention
from hf_effattn.commands import main as cli
from hf_effattn.conversion import convert
from hf_effattn.finetuning import masked_lm
from hf_effattn.finetuning import text_classification_trainer as trainer_script
from hf_effattn.finetuning.models import classifier_config
from hf_effattn.models.hybrid_parts import check_mechanism_weights
from hf_effattn.options.user_errors import TrainingDiverged

SMALL = dict(num_hidden_layers=1, hidden_size=32, num_attention_heads=4, intermediate_size=64, vocab_size=100)


def convert_argv(out, *options: str) -> list[str]:
    return ["convert", tiny_text_checkpoint(), "--attention_type", "kerformer", "--output_dir", str(out), *options]


# -- 3. refused before anything loads, trains or is written ----------------------------------------------------------

def test_window_dropouts_are_refused_before_the_transfer_writes_anything(tmp_path, capsys, no_data_loads):
    train, out = texts_file(tmp_path / "data"), tmp_path / "out"
    mlm = load_script("run_mlm").main
    transfer = ["--attention_type", "kerformer", "--attention_transfer_steps", "2"]
    for value in ("1.5", "-1"):
        with pytest.raises(SystemExit) as exit:
            mlm(mlm_argv(tiny_text_checkpoint(), train, out, *transfer, "--local_window", "4", "--window_dropout",
                         value))
        assert exit.value.code == 2 and "argument --window_dropout: expected a share (0 for none) in [0, 1)" in \
            capsys.readouterr().err
    refused(mlm, mlm_argv(tiny_text_checkpoint(), train, out, *transfer, "--window_dropout", "0.5"), [train],
            r"--window_dropout=0.5 acts on a local window or blocks beside the mechanism, and this 'kerformer' model "
            r"has none")
    assert not out.exists()  # the corrected rerun is not refused as "not empty"


def test_options_that_would_do_nothing_are_refused_as_convert_refuses_its_own(tmp_path, capsys):
    train = texts_file(tmp_path / "data")
    mlm = load_script("run_mlm").main
    for options, message in ((["--attention_transfer_window_dropout", "0.5"], "act only on an attention transfer: "
                              "add --attention_transfer_steps N"),
                             (["--lora_alpha", "32"], "act only on a LoRA adapter: add --lora_r R")):
        refused(mlm, mlm_argv(tiny_text_checkpoint(), train, tmp_path / "out", "--attention_type", "kerformer",
                              "--local_window", "4", *options), [train], message)
    with pytest.raises(SystemExit):
        mlm(mlm_argv(tiny_text_checkpoint(), train, tmp_path / "out", "--attention_transfer_window_dropout", "7"))
    assert "expected a share (0 for none) in [0, 1), got '7'" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_window_is_checked_against_the_requested_length(tmp_path, capsys):
    assert cli.main(convert_argv(tmp_path / "out", "--local_window", "40", "--max_length", "64")) == 0
    assert json.loads((tmp_path / "out" / "config.json").read_text())["local_window"] == 40
    cli_refused(capsys, convert_argv(tmp_path / "o2", "--local_window", "80", "--max_length", "64"),
                [tmp_path / "out"], "local_window=80: it must be at most the model's maximum length 64")
    model = hf_effattn.EffAttnRobertaModel.from_pretrained(tiny_text_checkpoint(), attention_type="dba",
                                                           local_window=40, max_length=64)
    assert model.config.local_window == 40 and model.config.attention_max_length == 64
    vit = hf_effattn.EffAttnViTModel.from_pretrained(tiny_vit_checkpoint(), attention_type="dba", local_window=20,
                                                     image_size=32)  # 17 tokens at 16 pixels, 65 at 32
    assert vit.config.local_window == 20
    args = masked_lm.parse_args(mlm_argv(tiny_text_checkpoint(), "unread.txt", tmp_path / "o3", "--attention_type",
                                         "dba", "--local_window", "40", "--max_length", "64"))
    masked_lm.RECIPE.check_options(args)  # run_mlm.py: checked at --max_length, before anything loads


def test_global_tokens_zero_means_none_and_more_than_the_length_are_refused(tmp_path, capsys):
    assert cli.main(convert_argv(tmp_path / "out", "--local_window", "4", "--global_tokens", "0")) == 0
    cli_refused(capsys, convert_argv(tmp_path / "o2", "--local_window", "4", "--global_tokens", "40"), [],
                "global_tokens=40: it must be at most the model's maximum length 32")


def test_a_max_length_whose_model_cannot_fit_in_memory_is_one_line(tmp_path, capsys):
    error = cli_refused(capsys, convert_argv(tmp_path / "out", "--max_length", "1000000000000"), [],
                        r"max_length=1000000000000 gives a model whose parameters alone take [\d,.]+ GB")
    assert "more than this machine's" in error and "choose a smaller max_length" in error
    assert not (tmp_path / "out").exists()
    with pytest.raises(ValueError, match="more than this machine's"):
        hf_effattn.EffAttnRobertaModel.from_pretrained(tiny_text_checkpoint(), max_length=10**12)


def test_a_resume_after_the_model_was_extended_is_refused_before_anything_loads(tmp_path):
    source, train, run = tmp_path / "source", texts_file(tmp_path / "data"), tmp_path / "run"
    convert(tiny_text_checkpoint(), "sdpa", source)
    assert not run_mlm(source, train, run, stop_after_steps=2).finished
    convert(str(source), None, tmp_path / "longer", max_length=64)  # the model folder changes shape since
    source.rename(tmp_path / "shorter")
    (tmp_path / "longer").rename(source)
    refused(load_script("run_mlm").main, mlm_argv(source, train, run, "--resume_from_checkpoint", "latest"),
            [source, train, run], r"Cannot resume from .*step_2: it was saved by a run with other settings: model "
            r"max_position_embeddings: 34 in the checkpoint, 66 now\. A resumed run")


# -- 4. one answer per setting ----------------------------------------------------------------------------------------

def test_a_window_given_twice_is_refused_in_python_as_on_the_command_line(tmp_path, capsys):
    twice = {"attention_config": {"local_window": 4}, "local_window": 8}
    folder = tmp_path / "kerformer"
    hf_effattn.EffAttnRobertaModel.from_pretrained(tiny_text_checkpoint(), attention_type="kerformer",
                                                   local_window=4).save_pretrained(folder)
    for make in (lambda: hf_effattn.create_model("roberta-base/kerformer", **SMALL, **twice),
                 lambda: hf_effattn.EffAttnRobertaConfig(attention_type="kerformer", **SMALL, **twice),
                 lambda: hf_effattn.EffAttnRobertaModel.from_pretrained(tiny_text_checkpoint(),
                                                                        attention_type="kerformer", **twice),
                 lambda: transformers.AutoConfig.from_pretrained(folder, **twice),
                 lambda: convert(tiny_text_checkpoint(), "kerformer", tmp_path / "out", **twice)):
        with pytest.raises(ValueError, match="^local_window=8 contradicts local_window=4 in attention_config: give "
                                             "it once.$"):
            make()
    cli_refused(capsys, convert_argv(tmp_path / "out", "--attention_config", '{"local_window": 4}', "--local_window",
                                     "8"), [folder], "--local_window 8 contradicts local_window=4 in --attention_config")
    assert not (tmp_path / "out").exists()


def test_a_window_keyword_of_a_config_is_the_models_local_part(tmp_path):
    config = hf_effattn.EffAttnRobertaConfig(attention_type="kerformer", local_window=16, **SMALL)
    assert config.local_window == 16 and "local_window" not in config.attention_config
    hf_effattn.EffAttnRobertaModel(config).save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["local_window"] == 16 and "local_window" not in saved["attention_config"]
    assert isinstance(hf_effattn.EffAttnRobertaModel.from_pretrained(tmp_path).encoder.layer[0].attention.self,
                      HybridAttention)
    with pytest.raises(ValueError, match="local_window=16: it must be None for attention_type='sdpa', which is exact"):
        hf_effattn.EffAttnRobertaConfig(local_window=16, **SMALL)  # sdpa takes no window: refused, not stored
    model = convert(tiny_text_checkpoint(), "kerformer", tmp_path / "out", local_window=8,
                    transfer={"data": str(texts_file(tmp_path / "data")), "window_dropout": 0.5, "steps": 1})
    assert model.config.local_window == 8


def test_a_trainer_resume_whose_checkpoint_has_another_window_is_refused(tmp_path, no_data_loads):
    checkpoint = tmp_path / "out" / "checkpoint-2"  # what Trainer saves: the model's config.json among the state
    hf_effattn.EffAttnRobertaForSequenceClassification.from_pretrained(
        tiny_text_checkpoint(), attention_type="kerformer", local_window=16).save_pretrained(checkpoint)
    refused(load_script("run_trainer").main, trainer_argv(tmp_path / "out", "--local_window", "30",
                                                           "--resume_from_checkpoint", str(checkpoint)),
            [tmp_path / "out", checkpoint], r"Cannot resume from .*checkpoint-2: its model was saved with other settings "
            r"than this run builds: local_window: 16 in the checkpoint, 30 now\. Resume with")
    _, options = trainer_script.parse_args(trainer_argv(tmp_path / "out", "--local_window", "16"))
    # the same model: resumes
    trainer_script.check_trainer_resume(str(checkpoint), classifier_config(options, "text"))
    _, options = trainer_script.parse_args(trainer_argv(tmp_path / "out", "--local_window", "16",
                                                        "--shared_normaliser", "false"))
    with pytest.raises(ValueError, match="shared_normaliser: null in the checkpoint, false now"):
        trainer_script.check_trainer_resume(str(checkpoint), classifier_config(options, "text"))


def test_run_trainer_takes_window_dropout_and_names_the_options_it_does_not_take(tmp_path):
    _, options = trainer_script.parse_args(trainer_argv(tmp_path, "--local_window", "4", "--window_dropout", "0.5"))
    assert options.window_dropout == 0.5
    model = hf_effattn.create_model("roberta-base/kerformer", local_window=4, **SMALL)
    callback = trainer_script.WindowDropoutEachStep(model, 0.5, seed=0)
    state = SimpleNamespace(global_step=next(step for step in range(20) if callback.dropout.drops(step)))
    callback.on_step_begin(None, state, None)
    assert model.encoder.layer[0].attention.self.parts == "mechanism"  # the window off on a drawn step
    callback.on_step_end(None, state, None)
    assert model.encoder.layer[0].attention.self.parts == "both"
    from hf_effattn.finetuning.text_classification import RECIPE

    taken = {option for action in trainer_script.build_parser()._actions for option in action.option_strings}
    others = {option for action in RECIPE.build_parser()._actions for option in action.option_strings}
    guide = (REPO / "docs" / "lora-and-trainer.md").read_text()
    assert [option for option in sorted(others - taken) if f"`{option}`" not in guide] == []


# -- 5. no raw traceback ------------------------------------------------------------------------------------------------

def test_a_diverging_run_stops_in_one_line_naming_its_step(tmp_path, capsys):
    data = texts_file(tmp_path / "data")
    error = cli_refused(capsys, convert_argv(tmp_path / "out", "--local_window", "4", "--transfer_data", str(data),
                                             "--transfer_steps", "5", "--transfer_learning_rate", "3e37"),
                        [data], r"at step \d+: training diverged; lower the learning rate")
    assert "--transfer_learning_rate" in error and not (tmp_path / "out").exists()
    model = hf_effattn.create_model("roberta-base/kerformer", local_window=4, **SMALL)
    with torch.no_grad():
        model.encoder.layer[0].attention.self.window.mechanism_logit[1] = math.inf
    with pytest.raises(TrainingDiverged, match=r"layer 0 .* at step 7: training diverged; lower --learning_rate"):
        check_mechanism_weights(model, "lower --learning_rate", 7)
    assert issubclass(TrainingDiverged, ValueError) and issubclass(TrainingDiverged, FloatingPointError)


def test_a_learning_rate_beyond_float32_is_refused_before_anything_runs(tmp_path, capsys):
    data = texts_file(tmp_path / "data")
    cli_refused(capsys, convert_argv(tmp_path / "out", "--transfer_data", str(data), "--transfer_learning_rate",
                                     "1e38"), [data], r"argument --transfer_learning_rate: expected a learning rate")
    with pytest.raises(ValueError, match=r"Invalid transfer argument learning_rate=1e\+38: it must be a finite number "
                                         r"> 0 and <= 3.4"):
        convert(tiny_text_checkpoint(), "kerformer", tmp_path / "out", transfer={"data": str(data),
                                                                                  "learning_rate": 1e38})
    with pytest.raises(SystemExit):
        load_script("run_mlm").main(mlm_argv(tiny_text_checkpoint(), data, tmp_path / "out", learning_rate=1e38))
    assert "argument --learning_rate: expected a learning rate" in capsys.readouterr().err
    refused(load_script("run_trainer").main, trainer_argv(tmp_path / "out", "--learning_rate", "1e38"), [data],
            r"--learning_rate 1e\+38: expected a learning rate in \(0, 3.40282e\+37\]")
    assert not (tmp_path / "out").exists()
