"""``tokenize_in_blocks`` answers every input as the tokenizer's own call does (one string, an empty batch, an empty
text), and refuses in one line, before it reads anything, what it cannot honour: a ``block`` or ``max_length`` that
is not an integer of at least 3, a text pair, texts that are not strings. The reproductions of issue 66."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoTokenizer

from hf_effattn import tokenize_in_blocks
from helpers.models import MINILM

pytestmark = pytest.mark.skipif(MINILM is None, reason="needs the MiniLM checkpoint package (the test extra)")

TEXT = "A short document about aligned blocks."


@pytest.fixture(scope="module")
def tokenizer():
    return AutoTokenizer.from_pretrained(MINILM)


def test_one_string_gives_a_batch_of_one_as_the_tokenizer_does(tokenizer):
    """A text shorter than a block is framed once, as the tokenizer frames it: ``[1, N]`` tensors with
    ``return_tensors``, a list of N ids without."""
    encoded = tokenize_in_blocks(tokenizer, TEXT, block=512, return_tensors="pt")
    expected = tokenizer(TEXT, return_tensors="pt")
    assert encoded["input_ids"].shape == expected["input_ids"].shape == (1, expected["input_ids"].shape[1])
    torch.testing.assert_close(encoded["input_ids"], expected["input_ids"], rtol=0, atol=0)
    torch.testing.assert_close(encoded["attention_mask"], expected["attention_mask"], rtol=0, atol=0)
    assert tokenize_in_blocks(tokenizer, TEXT, block=512)["input_ids"] == tokenizer(TEXT)["input_ids"]


def test_an_empty_list_gives_an_empty_batch(tokenizer):
    """Where the tokenizer's own call fails (``IndexError`` in Transformers 5.25): no rows, of no tokens."""
    assert dict(tokenize_in_blocks(tokenizer, [], block=512, padding=True)) == {"input_ids": [], "attention_mask": []}
    encoded = tokenize_in_blocks(tokenizer, [], block=512, padding=True, return_tensors="pt",
                                 return_special_tokens_mask=True)
    assert set(encoded) == {"input_ids", "attention_mask", "special_tokens_mask"}
    for values in encoded.values():
        assert values.shape == (0, 0) and values.dtype == torch.long


def test_an_empty_text_is_framed_by_cls_and_sep_like_any_other(tokenizer):
    encoded = tokenize_in_blocks(tokenizer, ["", TEXT], block=512, padding=True, return_tensors="pt")
    framed = tokenizer(["", TEXT], padding=True, return_tensors="pt")
    assert tokenizer("")["input_ids"] == [tokenizer.cls_token_id, tokenizer.sep_token_id]
    torch.testing.assert_close(encoded["input_ids"], framed["input_ids"], rtol=0, atol=0)
    torch.testing.assert_close(encoded["attention_mask"], framed["attention_mask"], rtol=0, atol=0)


@pytest.mark.parametrize("name, value, error, expected", [
    ("block", 16.0, TypeError, r"Invalid argument block=16\.0 \(float\): it must be an integer >= 3 \(a \[CLS\]"),
    ("block", None, TypeError, r"Invalid argument block=None \(NoneType\): it must be an integer >= 3"),
    ("block", True, TypeError, r"Invalid argument block=True \(bool\): it must be an integer >= 3"),
    ("block", 2, ValueError, r"Invalid argument block=2: it must be an integer >= 3 \(a \[CLS\], at least one token"),
    ("max_length", 0, ValueError, r"Invalid argument max_length=0: it must be an integer >= 3, or None for the "
                                  r"whole text \(a \[CLS\], at least one token and a \[SEP\]\)\.$"),
    ("max_length", 2, ValueError, r"Invalid argument max_length=2: it must be an integer >= 3"),
    ("max_length", -3, ValueError, r"Invalid argument max_length=-3: it must be an integer >= 3"),
    ("max_length", 64.0, TypeError, r"Invalid argument max_length=64\.0 \(float\): it must be an integer >= 3"),
])
def test_a_block_or_max_length_it_cannot_honour_is_refused_before_anything_is_read(name, value, error, expected):
    """The tokenizer is never called: an object without any method stands for it."""
    arguments = {"block": 16, "max_length": None, name: value}
    with pytest.raises(error, match=expected):
        tokenize_in_blocks(object(), [TEXT], **arguments)


@pytest.mark.parametrize("texts, pad_kwargs", [
    ([("A question?", "A document.")], {}), ([["A question?", "A document."]], {}),
    ("A question?", {"text_pair": "A document."}),
])
def test_a_text_pair_is_refused_in_one_line(texts, pad_kwargs):
    with pytest.raises(TypeError, match=r"^texts: tokenize_in_blocks frames single texts, not text pairs \(their "
                                        r"\[SEP\] between the two would be lost\): join each pair into one text"):
        tokenize_in_blocks(object(), texts, block=16, **pad_kwargs)


@pytest.mark.parametrize("texts, described", [
    ([TEXT, None], "list holding NoneType"), (7, "int"), ({"text": TEXT}, "dict"),
])
def test_texts_that_are_not_strings_are_refused(texts, described):
    with pytest.raises(TypeError, match=rf"^texts must be a string or a list of strings, got {described}\.$"):
        tokenize_in_blocks(object(), texts, block=16)
