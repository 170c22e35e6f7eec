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


def tokenize_in_blocks(tokenizer, texts: str | list[str], block: int, max_length: int | None = None,
                       return_special_tokens_mask: bool = False, **pad_kwargs):
    """``texts`` tokenised with ``[CLS]``/``[SEP]`` (the tokenizer's own) at every block's edges, each text truncated
    to ``max_length`` tokens (None: whole), then padded as ``tokenizer.pad(..., **pad_kwargs)`` pads
    (``padding=True``, ``return_tensors="pt"``, ...): a ``BatchEncoding`` with ``input_ids`` and ``attention_mask``,
    ready for ``model(**encoded)``, and ``special_tokens_mask`` (1 at every ``[CLS]``/``[SEP]``) where
    ``return_special_tokens_mask``, as the tokenizer's own option gives it."""
    single = isinstance(texts, str)
    contents = tokenizer([texts] if single else texts, add_special_tokens=False, verbose=False)["input_ids"]
    limit = None if max_length is None else content_fitting(max_length, block)
    rows = []
    for content in contents:
        ids = framed_blocks(content[:limit], block, tokenizer.cls_token_id, tokenizer.sep_token_id)
        row = {"input_ids": ids, "attention_mask": [1] * len(ids)}
        if return_special_tokens_mask:
            row["special_tokens_mask"] = special_tokens_mask(ids, tokenizer)
        rows.append(row)
    return tokenizer.pad(rows[0] if single else rows, **pad_kwargs)
