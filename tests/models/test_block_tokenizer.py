"""``EffAttnBlockTokenizer``: a tokenizer whose own call frames texts in blocks exactly as ``tokenize_in_blocks``
does (one string, a batch, padding, truncation, ``return_tensors``), refuses in one line what framing cannot honour,
and saves as a tokenizer whose ``tokenizer_config.json`` maps ``AutoTokenizer`` to its file while naming the source
tokenizer's class. On the real MiniLM tokenizer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from transformers import AutoTokenizer

from hf_effattn import tokenize_in_blocks
from hf_effattn.modeling import tokenization_effattn
from hf_effattn.modeling.tokenization_effattn import EffAttnBlockTokenizer
from helpers.models import MINILM

pytestmark = pytest.mark.skipif(MINILM is None, reason="needs the MiniLM checkpoint package (the test extra)")

BLOCK = 16
TEXTS = [" ".join(f"word{i}" for i in range(60)), "A short one.", ""]


@pytest.fixture(scope="module")
def plain():
    return AutoTokenizer.from_pretrained(MINILM)


@pytest.fixture(scope="module")
def framing(plain):
    return EffAttnBlockTokenizer.from_tokenizer(plain, BLOCK)


def assert_same_encoding(actual, expected) -> None:
    assert set(actual) == set(expected)
    for key in expected:
        if not isinstance(expected[key], list):  # tensors or arrays
            assert type(actual[key]) is type(expected[key]), key
            torch.testing.assert_close(torch.as_tensor(actual[key]), torch.as_tensor(expected[key]), rtol=0, atol=0)
        else:
            assert actual[key] == expected[key], key


@pytest.mark.parametrize("texts, options, reference", [
    (TEXTS[0], {}, {}),
    (TEXTS[0], {"return_tensors": "pt"}, {"return_tensors": "pt"}),
    (TEXTS, {"padding": True, "return_tensors": "pt"}, {"padding": True, "return_tensors": "pt"}),
    (TEXTS, {"padding": True, "truncation": True, "max_length": 40, "return_tensors": "pt"},
     {"padding": True, "max_length": 40, "return_tensors": "pt"}),
    (TEXTS, {"padding": "max_length", "truncation": True, "max_length": 40, "return_tensors": "np"},
     {"padding": "max_length", "max_length": 40, "return_tensors": "np"}),
    (TEXTS, {"padding": "max_length", "max_length": 200}, {"padding": "max_length", "max_length": 200}),
    (TEXTS, {"truncation": True, "return_special_tokens_mask": True},
     {"max_length": 512, "return_special_tokens_mask": True}),
    ([], {"padding": True, "return_tensors": "pt"}, {"padding": True, "return_tensors": "pt"}),
], ids=["one-string", "one-string-tensors", "padded", "truncated", "padded-to-max-length", "padded-uncut",
        "special-tokens-mask", "empty-batch"])
def test_its_call_gives_tokenize_in_blocks_encoding(framing, plain, texts, options, reference):
    """``truncation=True`` cuts to ``max_length``, else to ``model_max_length`` (512), as a tokenizer's call does."""
    expected = tokenize_in_blocks(plain, texts, block=BLOCK, **reference)
    encoded = framing(texts, **options)
    assert_same_encoding(encoded, expected)
    if options.get("padding") == "max_length":  # padded to the length asked, as the tokenizer's own call pads
        assert len(encoded["input_ids"][0]) == options["max_length"]
    if texts == TEXTS and options.get("return_tensors") is not None:
        ids = torch.as_tensor(encoded["input_ids"][0])
        assert (ids[::BLOCK] == plain.cls_token_id).all() and (ids[BLOCK - 1::BLOCK] == plain.sep_token_id).all()


def test_without_special_tokens_it_is_the_plain_tokenizer(framing, plain):
    assert framing(TEXTS, add_special_tokens=False)["input_ids"] == plain(TEXTS, add_special_tokens=False)["input_ids"]
    assert framing.decode(framing(TEXTS[1])["input_ids"]) == "[CLS] a short one. [SEP]"


@pytest.mark.parametrize("call, error, message", [
    (lambda t: t("first", "second"), TypeError, r"^text: EffAttnBlockTokenizer frames single texts, not text pairs "
                                                r"\(their \[SEP\] between the two would be lost\): join each pair into "
                                                r"one text, or load the plain tokenizer for pairs \(AutoTokenizer"),
    (lambda t: t([("first", "second")]), TypeError, r"^text: EffAttnBlockTokenizer frames single texts, not text "
                                                    r"pairs"),
    (lambda t: t(["first", None]), TypeError, r"^text must be a string or a list of strings, got list holding "
                                              r"NoneType\.$"),
    (lambda t: t(7), TypeError, r"^text must be a string or a list of strings, got int\.$"),
    (lambda t: t("first", return_offsets_mapping=True), TypeError,
     r"^return_offsets_mapping: not honoured by EffAttnBlockTokenizer, which frames texts in blocks; pass "
     r"add_special_tokens=False for the tokenizer's plain call\.$"),
    (lambda t: t.save_pretrained("folder", push_to_hub=True), ValueError,
     r"^push_to_hub: EffAttnBlockTokenizer completes its tokenizer_config.json after saving; save the folder, then "
     r"upload it \(huggingface_hub.upload_folder\)\.$"),
], ids=["pair", "pair-in-list", "not-a-string", "an-int", "offsets", "push"])
def test_what_framing_cannot_honour_is_refused_in_one_line(framing, call, error, message):
    with pytest.raises(error, match=message):
        call(framing)


@pytest.mark.parametrize("block", [2, 16.0, None, True])
def test_a_block_that_cannot_be_framed_is_refused(plain, block):
    with pytest.raises(ValueError, match=rf"^block={block!r}: a framed block holds an integer >= 3 tokens .*give "
                                         r"the model's local_block\.$"):
        EffAttnBlockTokenizer.from_tokenizer(plain, block)


def test_saved_it_maps_auto_tokenizer_to_its_file_and_names_the_source_class(framing, plain, tmp_path):
    framing.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    assert config["auto_map"]["AutoTokenizer"][0] == "tokenization_effattn.EffAttnBlockTokenizer"
    assert (config["tokenizer_class"], config["block"]) == (type(plain).__name__, BLOCK)
    assert (tmp_path / "tokenization_effattn.py").read_text() == Path(tokenization_effattn.__file__).read_text()
    unframed = AutoTokenizer.from_pretrained(tmp_path)  # without trust_remote_code: the source's own tokenizer
    assert type(unframed) is type(plain) and unframed(TEXTS)["input_ids"] == plain(TEXTS)["input_ids"]
    reloaded = AutoTokenizer.from_pretrained(tmp_path, trust_remote_code=True)
    assert type(reloaded).__name__ == "EffAttnBlockTokenizer" and reloaded.block == BLOCK
    assert_same_encoding(reloaded(TEXTS, padding=True, return_tensors="pt"),
                         framing(TEXTS, padding=True, return_tensors="pt"))
