"""Block hybrids through the commands: ``hf-effattn convert --local_block`` (its size by default the checkpoint's own
length), attention transfer with the gates at their own learning rate (in the report and the card), masked-LM
pretraining whose gates move at theirs, and every refusal in one line before anything is written. Tiny RoBERTa
checkpoints saved by Transformers, tiny texts."""

from __future__ import annotations

import json
import math

import pytest
import transformers

import hf_effattn
from helpers.finetuning import one_torch_thread  # noqa: F401 (autouse: one torch thread)
from helpers.finetuning import NUM_WORDS, load_script, tiny_text_checkpoint, training_options
from hf_effattn.commands import main as cli
from hf_effattn.models.hybrid_parts import mechanism_weights
from hf_effattn.modeling.local_settings import GATE_STARTS
from test_hybrid_training import convert_refusal

OWN_LENGTH = 32  # the tiny checkpoint's positions (tests/helpers/finetuning.py)


def long_texts_file(folder, count: int = 24) -> str:
    """Texts of 100 words, several blocks each: a text within one block would leave the memory nothing to read."""
    path = folder / "long_texts.txt"
    path.write_text("\n".join(" ".join(f"w{(i * j + j) % NUM_WORDS}" for j in range(100)) for i in range(count)))
    return str(path)


def test_convert_takes_the_checkpoints_own_length_as_blocks_and_trains_the_gates_at_their_rate(tmp_path, capsys):
    cli.main(["convert", tiny_text_checkpoint(), "--attention_type", "kerformer", "--local_block",
              "--max_length", str(4 * OWN_LENGTH), "--transfer_data", long_texts_file(tmp_path),
              "--transfer_steps", "3", "--transfer_batch_size", "4", "--transfer_mechanism_weight_learning_rate", "0.5",
              "--output_dir", str(tmp_path / "out")])
    model = transformers.AutoModel.from_pretrained(tmp_path / "out", trust_remote_code=True)
    assert model.config.local_block == OWN_LENGTH
    report = json.loads((tmp_path / "out" / "attention_transfer.json").read_text())
    assert report["mechanism_weight_learning_rate"] == 0.5
    start = GATE_STARTS["mixed", "blocks"]  # a gated memory's: the default beside blocks
    for layer, weights in zip(report["layers"], mechanism_weights(model)):
        assert layer["mechanism_weight"] == pytest.approx(weights)
        # three Adam steps of about 0.5 each in the logit: the gates are measurably away from their start
        assert all(abs(math.log(w / (1 - w)) - math.log(start / (1 - start))) > 0.3 for w in weights)
    card = (tmp_path / "out" / "README.md").read_text()
    assert "## Aligned blocks" in card and f"its own block of {OWN_LENGTH}" in card
    assert "(the gates at their own" in card and "the two outputs mixed per head" in card  # the default: gated


def test_masked_lm_pretraining_moves_the_gates_at_their_own_rate_only(tmp_path):
    """At a learning rate of 1e-7 for the weights and 0.2 for the gates, two steps (the linear schedule's 0.2, then
    0.1) move each gate's logit by Adam's steps, the first of them exactly the learning rate, about 0.3 at most in
    all, and the weights by next to nothing."""
    folder = tmp_path / "blocks"
    hf_effattn.convert(tiny_text_checkpoint(), "dba", folder, local_block=OWN_LENGTH, max_length=2 * OWN_LENGTH,
                       task="masked-lm")
    before = hf_effattn.EffAttnRobertaForMaskedLM.from_pretrained(folder)
    load_script("run_mlm").main(["--model_name_or_path", str(folder), "--train_file", long_texts_file(tmp_path),
                                 "--max_seq_length", str(2 * OWN_LENGTH), "--block_special_tokens",
                                 "--mechanism_weight_learning_rate", "0.2",
                                 *training_options(tmp_path / "run", max_train_steps=2, learning_rate=1e-7,
                                                   per_device_train_batch_size=2)])
    after = hf_effattn.EffAttnRobertaForMaskedLM.from_pretrained(tmp_path / "run")
    for old, new in zip(before.roberta.encoder.layer, after.roberta.encoder.layer):
        moved = (new.attention.self.window.mechanism_logit - old.attention.self.window.mechanism_logit).abs()
        assert (moved > 0.05).all() and (moved < 0.35).all()
        assert (new.attention.self.query.weight - old.attention.self.query.weight).abs().max() < 1e-5
    card = (tmp_path / "run" / "README.md").read_text()
    assert "mechanism_weight_learning_rate" in card and "## Aligned blocks" in card
    assert "| `block_special_tokens` | True |" in card  # and how to frame inputs so:
    assert f"tokenize_in_blocks(processor, texts, block={OWN_LENGTH}," in card


@pytest.mark.parametrize("options, message", [
    (["--attention_type", "kerformer", "--local_block", "9", "--max_length", "128"],
     f"local_block=9 differs from the period of this model's positions: .* set local_block={OWN_LENGTH}"),
    (["--attention_type", "kerformer", "--local_block", "64"],
     "local_block=64: it must be at most the model's maximum length 32"),
    (["--attention_type", "kerformer", "--local_block", "0"], "argument --local_block: expected an integer >= 1"),
    (["--attention_type", "kerformer", "--local_block", "16", "--local_window", "8"],
     "local_block=16: it must be None beside local_window=8"),
    (["--attention_type", "kerformer", "--local_block", "16", "--initial_mechanism_weight", "1.5"],
     r"argument --initial_mechanism_weight: expected a weight in \(0, 1\), got .1.5."),
    (["--attention_type", "kerformer", "--initial_mechanism_weight", "0.1"],
     "initial_mechanism_weight=0.1: it must be None without a local part"),
    (["--attention_type", "kerformer", "--attention_config", '{"shared_normaliser": false}'],
     "shared_normaliser=False: it must be None without a local part"),
    (["--attention_type", "dba", "--local_block", "16", "--attention_config", '{"shared_normaliser": false}'],
     r"shared_normaliser=False: it must be None for attention_type='dba': only a kernelized mechanism can share"),
    (["--attention_type", "sdpa", "--local_block", "16"], "use attention_type='local'"),
    (["--attention_type", "kerformer", "--local_block", "16", "--transfer_mechanism_weight_learning_rate", "0.1"],
     "act only on an attention transfer: add --transfer_data"),
])
def test_blocks_are_refused_in_one_line_before_anything_is_written(options, message, capsys, tmp_path):
    import re

    assert re.search(message, convert_refusal(capsys, tmp_path, tiny_text_checkpoint(), *options))


@pytest.mark.parametrize("options", [["--local_block"], ["--local_block", "16"]], ids=["own-length", "sized"])
def test_a_folder_without_config_json_is_named_with_where_the_checkpoint_is(options, capsys, tmp_path):
    """A sentence-transformers package's root (its model in ``model/``) has no ``config.json``: the message says so
    and points to the folder that holds it, with the size or without."""
    package = tmp_path / "package"
    (package / "model").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    error = convert_refusal(capsys, tmp_path, str(package), "--attention_type", "kerformer", "--max_length", "64",
                            *options)
    assert f"{package}: its config.json names no model_type, or there is no config.json: give the folder" in error
