"""Long inputs with ``[CLS]`` and ``[SEP]`` at every block's edges, as a checkpoint read its chunks.

A model with aligned blocks (``local_block=S``, ``hf_effattn.modeling.local_blocks``) reads each block of S tokens
as its checkpoint read an input of S tokens. A RoBERTa or BERT checkpoint always saw its inputs framed by its special
tokens: ``[CLS] ... [SEP]`` (``<s> ... </s>``). A long input tokenised as usual has them only at its two ends, so the
blocks in between read text the checkpoint never saw unframed. Laid out here instead, each block is framed::

    [CLS] t_0 ... t_{S-3} [SEP] [CLS] t_{S-2} ... t_{2S-5} [SEP] ...          (the last block may be shorter)

so that, with the gate at zero, the model's outputs over each block are the checkpoint's over that chunk: the
chunked reader exactly, as users run it today (:func:`tokenize_in_blocks`). Masked-LM pretraining lays its examples
out so with ``run_mlm.py --block_special_tokens``.

    encoded = tokenize_in_blocks(tokenizer, documents, block=512, max_length=4096, padding=True,
                                 return_tensors="pt")
    outputs = model(**encoded)
"""

from __future__ import annotations

from .modeling.settings import Spec, checked

# A framed block, and so a framed text, holds at least [CLS], one token and [SEP].
BLOCK_SPEC = Spec(int, minimum=3)
MAX_LENGTH_SPEC = Spec(int, minimum=3, none_means="the whole text")
FRAME_FIX = " (a [CLS], at least one token and a [SEP])"


def framed_blocks(ids: list[int], block: int, cls: int, sep: int) -> list[int]:
    """Content token ids (without special tokens) laid out in blocks of ``block`` tokens, each ``[cls] + block - 2
    ids + [sep]`` (the last one shorter): ``len(ids) + 2 ceil(len(ids) / (block - 2))`` ids."""
    if block < 3:
        raise ValueError(f"block={block}: a block framed by [CLS] and [SEP] needs at least 3 tokens.")
    step = block - 2
    return [token for start in range(0, len(ids), step) for token in (cls, *ids[start:start + step], sep)]


def special_tokens_mask(ids: list[int], tokenizer) -> list[int]:
    """1 at the tokenizer's special tokens (never a masked-LM target), else 0."""
    special = set(tokenizer.all_special_ids)
    return [int(token in special) for token in ids]


def content_fitting(length: int, block: int) -> int:
    """The most content ids that :func:`framed_blocks` lays out in at most ``length`` tokens."""
    whole, rest = divmod(length, block)
    return whole * (block - 2) + max(0, rest - 2)


def check_texts(texts, pad_kwargs: dict) -> None:
    """Raise ``TypeError`` unless ``texts`` is a string or a list (tuple) of strings: a text pair (a pair in the
    list, or ``text_pair=``) is refused, since its two texts would be read as one, without their separator."""
    pair = "text_pair" in pad_kwargs or (isinstance(texts, (list, tuple)) and any(
        isinstance(text, (list, tuple)) for text in texts))
    if pair:
        raise TypeError("texts: tokenize_in_blocks frames single texts, not text pairs (their [SEP] between the two "
                        "would be lost): join each pair into one text, or tokenise pairs with the tokenizer itself.")
    if isinstance(texts, str):
        return
    if not isinstance(texts, (list, tuple)) or not all(isinstance(text, str) for text in texts):
        raise TypeError(f"texts must be a string or a list of strings, got {described(texts)}.")


def described(texts) -> str:
    """The type of ``texts``, with that of its first item that is not a string: ``list holding NoneType``."""
    items = texts if isinstance(texts, (list, tuple)) else []
    wrong = [type(text).__name__ for text in items if not isinstance(text, str)][:1]
    return " holding ".join([type(texts).__name__, *wrong])


def tokenize_in_blocks(tokenizer, texts: str | list[str], block: int, max_length: int | None = None,
                       return_special_tokens_mask: bool = False, **pad_kwargs):
    """``texts`` tokenised with ``[CLS]``/``[SEP]`` (the tokenizer's own) at every block's edges, each text truncated
    to ``max_length`` tokens (None: whole), then padded as ``tokenizer.pad(..., **pad_kwargs)`` pads
    (``padding=True``, ``return_tensors="pt"``, ...): a ``BatchEncoding`` with ``input_ids`` and ``attention_mask``,
    ready for ``model(**encoded)``, and ``special_tokens_mask`` (1 at every ``[CLS]``/``[SEP]``) where
    ``return_special_tokens_mask``, as the tokenizer's own option gives it.

    As the tokenizer's own call: one string gives ``[1, N]`` tensors with ``return_tensors`` (lists of N ids
    without), an empty text ``[CLS] [SEP]``; an empty list gives an empty batch (``[0, 0]`` tensors), where the
    tokenizer's own call fails. ``block`` and ``max_length`` are
    integers of at least 3 (a ``[CLS]``, a token, a ``[SEP]``); a text pair is refused (``TypeError``)."""
    check_texts(texts, pad_kwargs)
    block = checked("block", block, BLOCK_SPEC, where="argument", fix=FRAME_FIX)
    max_length = checked("max_length", max_length, MAX_LENGTH_SPEC, where="argument", fix=FRAME_FIX)
    single = isinstance(texts, str)
    batch = [texts] if single else list(texts)
    contents = tokenizer(batch, add_special_tokens=False, verbose=False)["input_ids"] if batch else []
    limit = None if max_length is None else content_fitting(max_length, block)
    rows = [framed_row(content[:limit], block, tokenizer, return_special_tokens_mask) for content in contents]
    if not rows:
        return empty_batch(return_special_tokens_mask, pad_kwargs.get("return_tensors"))
    unbatched = single and pad_kwargs.get("return_tensors") is None  # lists of ids, as the tokenizer gives one text
    return tokenizer.pad(rows[0] if unbatched else rows, **pad_kwargs)


def empty_batch(return_special_tokens_mask: bool, return_tensors: str | None):
    """A ``BatchEncoding`` of no texts (where the tokenizer's own call raises ``IndexError``), with the keys of a
    :func:`framed_row`: ``[]`` each, or ``[0, 0]`` integer tensors with ``return_tensors``."""
    import numpy as np
    from transformers import BatchEncoding

    keys = ["input_ids", "attention_mask", *(["special_tokens_mask"] if return_special_tokens_mask else [])]
    empty = (lambda: []) if return_tensors is None else (lambda: np.zeros((0, 0), dtype=np.int64))
    return BatchEncoding({key: empty() for key in keys}, tensor_type=return_tensors)


def framed_row(content: list[int], block: int, tokenizer, return_special_tokens_mask: bool) -> dict:
    """One text's content ids framed in blocks (:func:`framed_blocks`; an empty text ``[CLS] [SEP]``, as the
    tokenizer frames it): its ``input_ids``, ``attention_mask`` and, where asked, ``special_tokens_mask``."""
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    ids = framed_blocks(content, block, cls, sep) or [cls, sep]
    values = {"input_ids": ids, "attention_mask": [1] * len(ids)}
    if return_special_tokens_mask:
        values["special_tokens_mask"] = special_tokens_mask(ids, tokenizer)
    return values
