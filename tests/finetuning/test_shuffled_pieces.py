"""``run_mlm.py --shuffled_pieces``: the training texts cut at word starts into pieces and shuffled with the run's
seed before the blocks are cut, the evaluation texts left whole; refused where it cannot mean anything."""

import json

import pytest
import torch
from helpers.finetuning import one_torch_thread  # noqa: F401 (autouse: one torch thread)
from helpers.finetuning import tiny_text_checkpoint, tiny_tokenizer
from helpers.models import MINILM

from hf_effattn.finetuning.masked_lm import check_shuffled_pieces, parse_args
from hf_effattn.finetuning.masked_lm_data import prepare_masked_lm_data
from hf_effattn.finetuning.text_pieces import cut_at_word_starts, shuffled_pieces


@pytest.mark.skipif(MINILM is None, reason="the real MiniLM is not installed (the test extra installs it)")
def test_a_text_is_cut_at_word_starts_into_pieces_that_join_back_into_it():
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(MINILM)
    text = "Interrupt handlers run with interrupts disabled; unbelievably long words are split.\n" * 6
    cut = cut_at_word_starts(text, tokenizer, 8)
    counts = [len(tokenizer(piece, add_special_tokens=False)["input_ids"]) for piece in cut]
    assert "".join(cut) == text and len(cut) > 3 and min(counts[:-1]) >= 8  # each at least 8 tokens, but the last
    assert sum(counts) == len(tokenizer(text, add_special_tokens=False)["input_ids"])  # no word cut in two
    assert cut_at_word_starts("a few words", tokenizer, 8) == ["a few words"]


def documents(count: int = 6) -> list[str]:
    """Texts of the tiny tokenizer's words, each its own words, so that a piece shows its document."""
    return [" ".join([f"w{number}"] * 10 + [f"w{number + 10}"] * 10) for number in range(1, count + 1)]


def test_the_pieces_of_every_text_are_shuffled_with_the_seed():
    from datasets import Dataset

    texts = Dataset.from_dict({"text": documents(), "id": list(range(6))})
    in_order = [piece for text in documents() for piece in cut_at_word_starts(text, tiny_tokenizer(), 5)]
    pieces = shuffled_pieces(texts, "text", tiny_tokenizer(), 5, seed=3, source="docs")
    assert pieces.column_names == ["text"] and len(in_order) == 6 * 4
    assert sorted(pieces["text"]) == sorted(in_order) and pieces["text"] != in_order  # every piece, shuffled
    assert shuffled_pieces(texts, "text", tiny_tokenizer(), 5, seed=3, source="docs")["text"] == pieces["text"]
    assert shuffled_pieces(texts, "text", tiny_tokenizer(), 5, seed=4, source="docs")["text"] != pieces["text"]


def test_run_mlm_trains_on_the_shuffled_pieces_and_evaluates_on_the_texts_whole(tmp_path):
    """With the option the training blocks are those of a file holding the shuffled pieces, one a line; the
    validation blocks those of the whole texts."""
    train, validation = tmp_path / "train.jsonl", tmp_path / "validation.jsonl"
    for path, texts in [(train, documents()), (validation, documents(4))]:
        path.write_text("".join(json.dumps({"text": text}) + "\n" for text in texts))

    def blocks(train_file, *options) -> tuple[list, list]:
        args = parse_args(["--model_name_or_path", tiny_text_checkpoint(dropout=0.1), "--output_dir",
                           str(tmp_path / "out"), "--train_file", str(train_file), "--validation_file",
                           str(validation), "--max_seq_length", "16", "--seed", "7", *options])
        data = prepare_masked_lm_data(args, tiny_tokenizer())
        return [[split.rows[index]["input_ids"] for index in range(len(split))]
                for split in (data.train, data.evaluation["validation"])]

    from datasets import Dataset

    reference = tmp_path / "pieces.jsonl"
    pieces = shuffled_pieces(Dataset.from_dict({"text": documents()}), "text", tiny_tokenizer(), 4, 7, "docs")
    reference.write_text("".join(json.dumps({"text": text}) + "\n" for text in pieces["text"]))
    trained, evaluated = blocks(train, "--shuffled_pieces", "4")
    expected_train, expected_evaluation = blocks(reference)
    assert [torch.equal(a, b) for a, b in zip(trained, expected_train)] == [True] * len(expected_train)
    assert len(trained) == len(expected_train) and len(evaluated) == len(expected_evaluation)
    assert all(torch.equal(a, b) for a, b in zip(evaluated, expected_evaluation))
    assert len({int(token) for token in trained[0]} - set(tiny_tokenizer().all_special_ids)) > 2  # drawn apart
    assert blocks(train)[0][0].tolist() != trained[0].tolist()


def test_pieces_are_refused_line_by_line_and_above_the_block_s_length():
    def refused(*options) -> str:
        args = parse_args(["--model_name_or_path", "m", "--output_dir", "out", "--train_file", "t.txt", *options])
        with pytest.raises(ValueError) as error:
            check_shuffled_pieces(args)
        return str(error.value)

    assert refused("--shuffled_pieces", "64", "--line_by_line").startswith(
        "--shuffled_pieces cuts texts that are concatenated into blocks; --line_by_line reads each text alone")
    assert refused("--shuffled_pieces", "2049", "--max_seq_length", "2048") == (
        "--shuffled_pieces 2049 is above --max_seq_length 2048: each block would read a part of one piece. Give a "
        "piece the block's length or less (e.g. --shuffled_pieces 2048), or drop the option.")
    for size in ("128", "512"):  # below and at the default 512: accepted
        check_shuffled_pieces(parse_args(["--model_name_or_path", "m", "--output_dir", "out", "--train_file", "t.txt",
                                          "--shuffled_pieces", size]))
    with pytest.raises(SystemExit):
        parse_args(["--model_name_or_path", "m", "--output_dir", "out", "--shuffled_pieces", "0"])
