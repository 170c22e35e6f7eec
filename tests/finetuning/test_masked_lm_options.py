"""``finetune/run_mlm.py``'s data and options: texts into blocks with per-example masks, line by line or from a named
column; bad data, lengths, models and heads refused before anything trains; ``--max_length`` extending the
checkpoint's positions; gradient checkpointing that changes no weight.
"""

import json
import random

import pytest
import torch
from transformers import AutoTokenizer
from helpers.finetuning import one_torch_thread  # noqa: F401 (autouse: one torch thread)
from helpers.finetuning import (
    assert_same_weights,
    load_script,
    paragraph,
    text_file,
    tiny_text_checkpoint,
    tiny_tokenizer,
    tiny_vit_checkpoint,
    training_options,
)

from hf_effattn import EffAttnRobertaForMaskedLM
from hf_effattn.finetuning.masked_lm import load_masked_lm, parse_args
from hf_effattn.finetuning.masked_lm_data import group_texts, prepare_masked_lm_data


# -- data -----------------------------------------------------------------------------------------------------------


def test_group_texts_concatenates_and_cuts_dropping_the_remainder():
    batch = {"input_ids": [[0, 5, 2], [0, 6, 7, 8, 2], [0, 9, 2]], "special_tokens_mask": [[1, 0, 1], [1, 0, 0, 0, 1],
                                                                                            [1, 0, 1]]}
    assert group_texts(batch, 4) == {"input_ids": [[0, 5, 2, 0], [6, 7, 8, 2]],
                                     "special_tokens_mask": [[1, 0, 1, 1], [0, 0, 0, 1]]}


def prepared(tmp_path, *options):
    argv = ["--model_name_or_path", tiny_text_checkpoint(dropout=0.1), "--output_dir", str(tmp_path / "out"),
            *options]
    return prepare_masked_lm_data(parse_args(argv), tiny_tokenizer())


def test_masks_are_a_function_of_seed_epoch_and_example(tmp_path):
    rng = random.Random(0)
    train = text_file(tmp_path, [paragraph(rng) for _ in range(200)])
    data = prepared(tmp_path, "--train_file", train, "--max_seq_length", "32", "--mlm_probability", "0.3")
    examples = data.train
    first = [examples[index] for index in range(len(examples))]
    assert all(example["input_ids"].shape == (32,) for example in first)
    assert all(torch.equal(examples[3][key], first[3][key]) for key in first[3])  # read again: the same masks
    examples.set_epoch(1)
    assert not torch.equal(examples[3]["labels"], first[3]["labels"])  # another epoch: other masks
    special = set(tiny_tokenizer().all_special_ids)
    targets = torch.cat([example["labels"] for example in first])
    inputs = torch.cat([example["input_ids"] for example in first])
    assert not set(targets[targets != -100].tolist()) & special  # special tokens are never targets
    assert 0.25 < (targets != -100).float().mean().item() < 0.35
    masked = inputs[targets != -100] == tiny_tokenizer().mask_token_id
    assert 0.7 < masked.float().mean().item() < 0.9  # 80% of the targets read <mask>
    assert sorted(data.evaluation) == ["validation"]  # 10% of the lines held out


def test_line_by_line_keeps_each_line_as_one_truncated_example(tmp_path):
    lines = ["w1 w2 w3", "", " ", " ".join(["w4"] * 50), "w5"]
    data = prepared(tmp_path, "--train_file", text_file(tmp_path, lines), "--validation_file",
                    text_file(tmp_path, ["w6 w7"], "validation.txt"), "--line_by_line", "--max_seq_length", "8")
    lengths = [len(data.train.rows[index]["input_ids"]) for index in range(len(data.train))]
    assert lengths == [5, 8, 3]  # <s> ... </s>; blank lines dropped; the long line truncated


def test_json_lines_with_a_named_text_column(tmp_path):
    path = tmp_path / "docs.jsonl"
    path.write_text("".join(json.dumps({"id": index, "body": " ".join(["w1"] * 20)}) + "\n" for index in range(10)))
    data = prepared(tmp_path, "--train_file", str(path), "--validation_split_percentage", "20",
                    "--text_column_name", "body", "--max_seq_length", "11")
    assert len(data.train) == 8 * 22 // 11 and len(data.evaluation["validation"]) == 2 * 22 // 11


# -- refusals, before anything trains -------------------------------------------------------------------------------


def refusal(tmp_path, model_options: list[str], data_options: list[str], **overrides) -> str:
    """The message of the ``ValueError`` a run refuses with; nothing was written to its output folder."""
    argv = [*model_options, *data_options, *training_options(tmp_path / "out", **overrides)]
    with pytest.raises(ValueError) as error:
        load_script("run_mlm").main(argv)
    assert not (tmp_path / "out").exists()
    return str(error.value)


def tiny_model() -> list[str]:
    return ["--model_name_or_path", tiny_text_checkpoint(dropout=0.1), "--max_seq_length", "16"]


def test_bad_data_is_refused_naming_the_problem(tmp_path):
    rng = random.Random(0)
    good = text_file(tmp_path, [paragraph(rng) for _ in range(20)])
    (tmp_path / "empty.txt").write_text("")
    assert "empty.txt is empty (0 bytes)" in refusal(tmp_path, tiny_model(),
                                                     ["--train_file", str(tmp_path / "empty.txt")])
    (tmp_path / "image.txt").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR")
    assert "image.txt is not a text file (a NUL byte at byte 8): give UTF-8 text" in refusal(
        tmp_path, tiny_model(), ["--train_file", str(tmp_path / "image.txt")])
    (tmp_path / "latin1.txt").write_bytes("caf\xe9\n".encode("latin-1"))
    assert "latin1.txt is not a text file ('utf-8' codec can't decode byte 0xe9" in refusal(
        tmp_path, tiny_model(), ["--train_file", str(tmp_path / "latin1.txt")])
    blank = text_file(tmp_path, [" ", "", "\t"] * 10, "blank.txt")
    assert "holds no text (27 rows, every one blank)" in refusal(tmp_path, tiny_model(), ["--train_file", blank])
    (tmp_path / "a.png").write_bytes(b"\x89PNG")
    assert "Unsupported data file" in refusal(tmp_path, tiny_model(), ["--train_file", str(tmp_path / "a.png")])
    assert ("no column 'content' (--text_column_name); its columns: ['text']" in
            refusal(tmp_path, tiny_model(), ["--train_file", good, "--text_column_name", "content"]))
    path = tmp_path / "docs.jsonl"
    path.write_text("".join(json.dumps({"title": "w1", "body": "w2 w3"}) + "\n" for _ in range(10)))
    assert ("no column 'text' among its columns ['title', 'body']: name the column of texts with --text_column_name"
            in refusal(tmp_path, tiny_model(), ["--train_file", str(path)]))
    (tmp_path / "broken.jsonl").write_text('not json\n{"text": "w1"}\n')
    assert "broken.jsonl cannot be read as json (ArrowInvalid: JSON parse error" in refusal(
        tmp_path, tiny_model(), ["--train_file", str(tmp_path / "broken.jsonl")])
    short = text_file(tmp_path, ["w1 w2"] * 5, "short.txt")
    assert "short.txt gives 16 tokens, not one block of --max_seq_length 32: give more text" in refusal(
        tmp_path, tiny_model(), ["--train_file", short, "--max_seq_length", "32"])


def test_a_sequence_length_beyond_the_model_names_max_length(tmp_path):
    message = refusal(tmp_path, ["--model_name_or_path", tiny_text_checkpoint(dropout=0.1)],
                      ["--train_file", "never-read.txt"])  # the default length, 512
    assert message.endswith("--max_seq_length 512 is longer than the 32 tokens "
                            f"{tiny_text_checkpoint(dropout=0.1)} takes: extend its positions with --max_length 512 "
                            "(or convert it first with hf-effattn convert ... --max_length 512), or use "
                            "--max_seq_length 32 or less.")


def test_a_vision_checkpoint_and_lora_are_refused(tmp_path):
    assert "is a vision checkpoint (model_type 'vit'): masked-LM pretraining takes a text encoder" in refusal(
        tmp_path, ["--model_name_or_path", tiny_vit_checkpoint()], ["--train_file", "never-read.txt"])
    assert "--lora_r: run_mlm.py trains the whole model" in refusal(
        tmp_path, [*tiny_model(), "--lora_r", "4"], ["--train_file", "never-read.txt"])


def test_new_mlm_head_is_refused_where_the_checkpoint_has_one(tmp_path):
    rng = random.Random(0)
    train = text_file(tmp_path, [paragraph(rng) for _ in range(20)])
    assert "has a masked-LM head already, which continued pretraining keeps: drop --new_mlm_head" in refusal(
        tmp_path, [*tiny_model(), "--new_mlm_head"], ["--train_file", train, "--max_seq_length", "16"])


# -- positions extended as the checkpoint loads ---------------------------------------------------------------------


def test_max_length_extends_the_positions_of_the_checkpoint(tmp_path):
    rng = random.Random(0)
    train = text_file(tmp_path, [paragraph(rng) for _ in range(60)])
    outcome = load_script("run_mlm").main([
        *tiny_model(), "--max_length", "64", "--train_file", train, "--max_seq_length", "64",
        *training_options(tmp_path / "long", max_train_steps=2, per_device_train_batch_size=2)])
    assert outcome.finished
    assert EffAttnRobertaForMaskedLM.from_pretrained(tmp_path / "long").config.attention_max_length == 64
    # The saved tokenizer truncates to the 64 tokens the model now takes, not to the checkpoint's 32.
    assert AutoTokenizer.from_pretrained(tiny_text_checkpoint(dropout=0.1)).model_max_length == 32
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "long")
    assert tokenizer.model_max_length == 64
    assert len(tokenizer(" ".join(["w1"] * 100), truncation=True).input_ids) == 64
    card = (tmp_path / "long" / "README.md").read_text()
    assert ("extended as it loaded for this training run from the source checkpoint's `max_length` of 32 to 64"
            in card)
    assert "roberta.embeddings.position_embeddings.weight" in card
    assert "This run then trained it on inputs of up to 64 tokens." in card


def test_a_max_length_below_the_checkpoints_is_refused_naming_max_seq_length(tmp_path):
    message = refusal(tmp_path, [*tiny_model(), "--max_length", "16"], ["--train_file", "never-read.txt"])
    assert message == (f"--max_length 16 is below the 32 tokens {tiny_text_checkpoint(dropout=0.1)} takes already: "
                       "positions are extended, never cut. Drop --max_length; for shorter examples, use "
                       "--max_seq_length 16.")


def test_gradient_checkpointing_recomputes_without_changing_the_weights(tmp_path):
    rng = random.Random(0)
    train = text_file(tmp_path, [paragraph(rng) for _ in range(60)])
    options = [*tiny_model(), "--attention_type", "singularformer", "--train_file", train]
    model = load_masked_lm(parse_args([*options, "--gradient_checkpointing", "--output_dir", "unused"]))
    assert all(layer.gradient_checkpointing for layer in model.roberta.encoder.layer)
    for name, flag in (("plain", False), ("recomputed", True)):  # dropout 0.1: the recomputation replays it
        load_script("run_mlm").main([*options, *training_options(tmp_path / name, max_train_steps=3,
                                                                 gradient_checkpointing=flag)])
    assert_same_weights(tmp_path / "plain", tmp_path / "recomputed")
