"""Training a mechanism beside a local window: conversion, attention transfer with window dropout and its report,
masked-LM pretraining with sparse prediction, the model card, and the window's refusals from the command line.
Tiny RoBERTa checkpoints saved by Transformers, tiny texts."""

from __future__ import annotations

import json

import pytest
import torch
import transformers

import hf_effattn
from helpers.finetuning import one_torch_thread  # noqa: F401 (autouse: one torch thread)
from helpers.finetuning import load_script, tiny_text_checkpoint, training_options
from helpers.models import save_source, text_config
from hf_effattn.commands import main as cli
from hf_effattn.models.hybrid_parts import WindowDropout, mechanism_weights

WORDS = ["alpha", "beta", "gamma", "delta", "kernel", "window", "token", "layer"]


def texts_file(folder, count: int = 24) -> str:
    path = folder / "texts.txt"
    path.write_text("\n".join(" ".join(WORDS[(i + j) % len(WORDS)] for j in range(12)) for i in range(count)) + "\n")
    return str(path)


@pytest.fixture
def source(tmp_path):
    """A tiny RoBERTa (18 positions) with a word-level tokenizer, saved by Transformers."""
    return tiny_text_checkpoint()


def test_conversion_with_transfer_reports_the_weights_and_the_window_alone(source, tmp_path, monkeypatch):
    parts = []
    import hf_effattn.conversion.transfer.training as transfer_module

    real_only_part = transfer_module.only_part

    def recording(model, part):
        parts.append(part)
        return real_only_part(model, part)

    monkeypatch.setattr(transfer_module, "only_part", recording)
    model = hf_effattn.convert(source, "kerformer", tmp_path / "out", attention_config={"local_window": 8},
                               transfer={"data": texts_file(tmp_path), "steps": 8, "batch_size": 4,
                                         "window_dropout": 0.5})
    training_parts = [part for part in parts if part != "window"]  # the report's measure with the window alone
    assert training_parts == [WindowDropout(0.5).part(step) for step in range(8)]
    assert "mechanism" in training_parts and None in training_parts
    report = json.loads((tmp_path / "out" / "attention_transfer.json").read_text())
    assert report["window_dropout"] == 0.5
    heads = model.config.num_attention_heads
    for layer, weights in zip(report["layers"], mechanism_weights(model)):
        assert layer["mechanism_weight"] == pytest.approx(weights)
    assert all(len(layer["mechanism_weight"]) == heads and layer["mse_after_window_alone"] >= 0
               for layer in report["layers"])
    card = (tmp_path / "out" / "README.md").read_text()
    assert "## Local window" in card and "under one normaliser" in card and "MSE after, window alone" in card
    reloaded = transformers.AutoModel.from_pretrained(tmp_path / "out", trust_remote_code=True)
    assert reloaded.config.local_window == 8


def test_a_window_in_one_layer_of_two_is_reported_for_that_layer_only(source, tmp_path, capsys):
    cli.main(["convert", source, "--attention_type", "dba", "--local_window", "8", "--local_window_every", "2",
              "--transfer_data", texts_file(tmp_path), "--transfer_steps", "2", "--transfer_batch_size", "4",
              "--output_dir", str(tmp_path / "out")])
    report = json.loads((tmp_path / "out" / "attention_transfer.json").read_text())
    assert [layer["mechanism_weight"] is None for layer in report["layers"]] == [False, True]
    assert [layer["mse_after_window_alone"] is None for layer in report["layers"]] == [False, True]
    printed = capsys.readouterr().out
    assert "beside the local part" in printed and len(report["layers"][0]["mechanism_weight"]) == 4
    card = (tmp_path / "out" / "README.md").read_text()
    assert "in one layer of 2 (the others run dba alone)" in card
    table = card[card.index("| Layer | Mechanism weight"):].split("\n\n")[0].splitlines()
    assert [row.split("|")[1].strip() for row in table[2:]] == ["0"]
    transfer_rows = card[card.index("| Layer | MSE before"):].split("\n\n")[0].splitlines()[2:]
    assert [row.count("|") for row in transfer_rows] == [7, 7] and transfer_rows[1].endswith("| - |")
    reloaded = transformers.AutoModel.from_pretrained(tmp_path / "out", trust_remote_code=True)
    assert [hasattr(layer.attention.self, "window") for layer in reloaded.encoder.layer] == [True, False]


def test_sparse_prediction_gives_the_loss_of_the_full_logits():
    torch.manual_seed(0)
    model = hf_effattn.EffAttnRobertaForMaskedLM(text_config("dba+window")).eval()
    input_ids = torch.randint(3, 40, (2, 12))
    labels = torch.where(torch.rand(2, 12) < 0.3, input_ids, -100)
    labels[0, 0] = input_ids[0, 0]  # at least one
    full = model(input_ids=input_ids, labels=labels)
    sparse = model(input_ids=input_ids, labels=labels, sparse_prediction=True)
    torch.testing.assert_close(sparse.loss, full.loss)
    assert sparse.logits.shape == (int((labels != -100).sum()), 40)
    torch.testing.assert_close(sparse.logits, full.logits[labels != -100])
    with pytest.raises(ValueError, match="sparse_prediction=True computes the logits at the labelled tokens only"):
        model(input_ids=input_ids, sparse_prediction=True)


def test_masked_lm_pretraining_trains_the_hybrid_with_window_dropout(source, tmp_path):
    run_mlm = load_script("run_mlm")
    texts = texts_file(tmp_path)
    argv = ["--model_name_or_path", source, "--attention_type", "dba", "--local_window", "6", "--global_tokens", "1",
            "--train_file", texts, "--validation_split_percentage", "20", "--max_seq_length", "16",
            "--window_dropout", "0.5", *training_options(tmp_path / "run", max_train_steps=4,
                                                         per_device_train_batch_size=4)]
    outcome = run_mlm.main(argv)
    assert outcome.finished
    saved = hf_effattn.EffAttnRobertaForMaskedLM.from_pretrained(tmp_path / "run")
    assert saved.config.local_window == 6 and saved.config.global_tokens == 1
    assert mechanism_weights(saved) != [[0.5, 0.5, 0.5, 0.5]] * 2  # the weights trained
    card = (tmp_path / "run" / "README.md").read_text()
    assert "## Local window" in card and "the two outputs mixed per head" in card
    assert "| `window_dropout` | 0.5 |" in card


def convert_refusal(capsys, tmp_path, source, *options) -> str:
    """``hf-effattn convert`` with ``options``: its one-line error (exit status 2, nothing written)."""
    with pytest.raises(SystemExit) as exit:
        cli.main(["convert", source, "--output_dir", str(tmp_path / "out"), *options])
    assert exit.value.code == 2 and not (tmp_path / "out").exists()
    error = capsys.readouterr().err
    assert error.count("\n") == 1
    return error


@pytest.mark.parametrize("options, message", [
    (["--attention_type", "kerformer", "--local_window", "64"],
     "local_window=64: it must be at most the model's maximum length"),
    (["--attention_type", "kerformer", "--local_window", "0"], "argument --local_window: expected an integer >= 1"),
    (["--attention_type", "kerformer", "--global_tokens", "1"], "global_tokens=1: it must be 0 without a local part"),
    (["--attention_type", "kerformer", "--local_window_every", "2"],
     "local_window_every=2: it must be 1 without a local part"),
    (["--attention_type", "sdpa", "--local_window", "4"], "use attention_type='local'"),
    (["--local_window", "4"], "use attention_type='local'"),  # a RoBERTa keeps its softmax without --attention_type
    (["--attention_type", "dba", "--local_window", "4", "--transfer_window_dropout", "0.2"],
     "--transfer_window_dropout act only on an attention transfer: add --transfer_data"),
    (["--attention_type", "dba", "--local_window", "4", "--attention_config", '{"local_window": 6}'],
     "--local_window 4 contradicts local_window=6 in --attention_config"),
    (["--attention_type", "kerformer", "--local_window", "4", "--shared_normaliser", "yes"],
     "argument --shared_normaliser: expected true or false, got 'yes'"),
    (["--attention_type", "dba", "--local_window", "4", "--shared_normaliser", "true"],
     "shared_normaliser=True: it must be None for attention_type='dba': only a kernelized mechanism can share"),
    (["--attention_type", "local", "--local_window", "1"], "local_window=1: it must be an integer >= 2"),
])
def test_the_window_is_refused_in_one_line(options, message, capsys, tmp_path, source):
    assert message in convert_refusal(capsys, tmp_path, source, *options)


@pytest.mark.parametrize("value, shared", [("true", True), ("false", False)])
def test_shared_normaliser_on_the_command_line_is_the_models(value, shared, tmp_path, source):
    """``--shared_normaliser`` sets the model's own setting: saved in ``config.json``, it picks the composition."""
    cli.main(["convert", source, "--attention_type", "kerformer", "--local_window", "4", "--shared_normaliser", value,
              "--output_dir", str(tmp_path / "out")])
    model = hf_effattn.EffAttnRobertaModel.from_pretrained(tmp_path / "out")
    assert model.config.shared_normaliser is shared
    assert model.encoder.layer[0].attention.self.shares_normaliser is shared


@pytest.mark.parametrize("option, value", [("window_dropout", "0.2"), ("mechanism_weight_learning_rate", "0.1")])
def test_options_on_the_local_part_are_refused_without_one_before_anything_trains(option, value, capsys, tmp_path,
                                                                                  source):
    error = convert_refusal(capsys, tmp_path, source, "--attention_type", "dba", "--transfer_data",
                            texts_file(tmp_path), f"--transfer_{option}", value)
    assert (f"{option}={value} acts on a local window or blocks beside the mechanism, and this 'dba' model has none: "
            "set local_window" in error)


@pytest.mark.parametrize("option, value", [("window_dropout", "0.3"), ("mechanism_weight_learning_rate", "0.1")])
def test_fine_tuning_refuses_options_on_the_local_part_without_one(option, value, tmp_path, source):
    with pytest.raises(ValueError, match=f"--{option}={value} acts on a local window or blocks beside the mechanism"):
        load_script("run_mlm").main(["--model_name_or_path", source, "--attention_type", "dba",
                                     "--train_file", texts_file(tmp_path), "--validation_split_percentage", "20",
                                     "--max_seq_length", "16", f"--{option}", value,
                                     *training_options(tmp_path / "run", max_train_steps=2)])


def test_a_source_folder_converts_with_the_window_from_its_own_python_api(tmp_path):
    folder = tmp_path / "roberta"
    save_source(transformers.RobertaModel, "roberta", folder)
    model = hf_effattn.EffAttnRobertaModel.from_pretrained(folder, attention_type="psf", local_window=6,
                                                           global_tokens=1)
    assert model.encoder.layer[0].attention.self.uses_query_key  # the window brings PSF a query and a key
    source = transformers.RobertaModel.from_pretrained(folder)
    torch.testing.assert_close(model.encoder.layer[0].attention.self.query.weight,
                               source.encoder.layer[0].attention.self.query.weight)
