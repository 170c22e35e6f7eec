"""Texts framed in blocks, ``[CLS] ... [SEP]`` at every aligned block's edges, and the tokenizer that frames so.

A block model (``local_block=S``) pretrained framed (``run_mlm.py --block_special_tokens``) read its inputs as::

    [CLS] t_0 ... t_{S-3} [SEP] [CLS] t_{S-2} ... t_{2S-5} [SEP] ...          (the last block may be shorter)

:func:`frame_texts` lays texts out so with any tokenizer (``hf_effattn.tokenize_in_blocks`` checks its arguments,
then calls it); :class:`EffAttnBlockTokenizer` is a tokenizer whose own call does, so that a saved folder frames its
inputs for a user with Transformers alone::

    tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)   # this class, block=S
    outputs = model(**tokenizer(texts, padding=True, truncation=True, return_tensors="pt"))

Saved, its ``tokenizer_config.json`` names the source tokenizer's own class (a load without
``trust_remote_code`` gets that tokenizer, unframed, as before) and maps ``AutoTokenizer`` to this file, which
Transformers copies beside it. This file imports only torch and Transformers: it travels alone.
"""

from __future__ import annotations

import json
import os

import torch
from transformers import BatchEncoding
from transformers.tokenization_utils_tokenizers import TokenizersBackend


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


def framed_row(content: list[int], block: int, tokenizer, return_special_tokens_mask: bool) -> dict:
    """One text's content ids framed in blocks (:func:`framed_blocks`; an empty text ``[CLS] [SEP]``, as the
    tokenizer frames it): its ``input_ids``, ``attention_mask`` and, where asked, ``special_tokens_mask``."""
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    ids = framed_blocks(content, block, cls, sep) or [cls, sep]
    values = {"input_ids": ids, "attention_mask": [1] * len(ids)}
    if return_special_tokens_mask:
        values["special_tokens_mask"] = special_tokens_mask(ids, tokenizer)
    return values


def empty_batch(return_special_tokens_mask: bool, return_tensors: str | None) -> BatchEncoding:
    """A ``BatchEncoding`` of no texts (where the tokenizer's own call raises ``IndexError``), with the keys of a
    :func:`framed_row`: ``[]`` each, or ``[0, 0]`` integer tensors with ``return_tensors``."""
    keys = ["input_ids", "attention_mask", *(["special_tokens_mask"] if return_special_tokens_mask else [])]
    empty = (lambda: []) if return_tensors is None else (lambda: torch.zeros((0, 0), dtype=torch.long))
    return BatchEncoding({key: empty() for key in keys}, tensor_type=return_tensors)


def check_single_texts(texts, argument: str, framer: str, pairs_fix: str, pair_given: bool = False) -> None:
    """Raise ``TypeError`` unless ``texts`` is a string or a list (tuple) of strings: a text pair (a pair in the list,
    or ``pair_given``) is refused, since ``framer`` would read its two texts as one, without their separator."""
    if pair_given or (isinstance(texts, (list, tuple)) and any(isinstance(text, (list, tuple)) for text in texts)):
        raise TypeError(f"{argument}: {framer} frames single texts, not text pairs (their [SEP] between the two "
                        f"would be lost): join each pair into one text, or {pairs_fix}.")
    if isinstance(texts, str):
        return
    if not isinstance(texts, (list, tuple)) or not all(isinstance(text, str) for text in texts):
        raise TypeError(f"{argument} must be a string or a list of strings, got {described(texts)}.")


def described(texts) -> str:
    """The type of ``texts``, with that of its first item that is not a string: ``list holding NoneType``."""
    items = texts if isinstance(texts, (list, tuple)) else []
    wrong = [type(text).__name__ for text in items if not isinstance(text, str)][:1]
    return " holding ".join([type(texts).__name__, *wrong])


def frame_texts(tokenizer, texts: str | list[str], block: int, length: int | None = None,
                return_special_tokens_mask: bool = False, **pad_kwargs) -> BatchEncoding:
    """``texts`` (a string or a list of strings) tokenised by ``tokenizer`` with its ``[CLS]``/``[SEP]`` at every
    block of ``block`` tokens, each text truncated to ``length`` tokens (None: whole), then padded as
    ``tokenizer.pad(..., **pad_kwargs)`` pads: ``input_ids``, ``attention_mask`` (``[B, N]``, or lists of N ids for
    one string without ``return_tensors``) and, where asked, ``special_tokens_mask``. Arguments are not checked."""
    single = isinstance(texts, str)
    batch = [texts] if single else list(texts)
    contents = tokenizer(batch, add_special_tokens=False, verbose=False)["input_ids"] if batch else []
    limit = None if length is None else content_fitting(length, block)
    rows = [framed_row(content[:limit], block, tokenizer, return_special_tokens_mask) for content in contents]
    if not rows:
        return empty_batch(return_special_tokens_mask, pad_kwargs.get("return_tensors"))
    if pad_kwargs.get("padding") == "max_length":  # to ``length``, as a tokenizer pads to the length it cuts to
        pad_kwargs.setdefault("max_length", length)
    unbatched = single and pad_kwargs.get("return_tensors") is None  # lists of ids, as the tokenizer gives one text
    return tokenizer.pad(rows[0] if unbatched else rows, **pad_kwargs)


PAD_OPTIONS = ("padding", "pad_to_multiple_of", "padding_side", "return_attention_mask", "return_tensors", "verbose")
PAIRS_FIX = "load the plain tokenizer for pairs (AutoTokenizer.from_pretrained without trust_remote_code)"


class EffAttnBlockTokenizer(TokenizersBackend):
    """A tokenizer (its ``tokenizer.json``: the source checkpoint's) whose call frames every text in blocks of
    ``block`` tokens, as a block model pretrained framed read them (:func:`frame_texts`).

    Its call takes what a tokenizer's call takes for single texts: a string or a list of strings, ``padding``,
    ``truncation`` (to ``max_length``, or ``model_max_length`` without it), ``max_length``, ``return_tensors``,
    ``return_special_tokens_mask``, ``pad_to_multiple_of``, ``padding_side``, ``return_attention_mask``;
    ``add_special_tokens=False`` gives the plain ids, unframed. A text pair is refused (its separator would be
    lost), and so is any other option, each in one line."""

    @property
    def block(self) -> int:
        """The block size framed (the model's ``local_block``): ``tokenizer_config.json``'s ``block``."""
        return self.init_kwargs["block"]

    @property
    def source_tokenizer_class(self) -> str:
        """The class of the tokenizer this one frames with (``BertTokenizer``, ``RobertaTokenizer``, ...)."""
        return self.init_kwargs["source_tokenizer_class"]

    @classmethod
    def from_tokenizer(cls, tokenizer, block: int) -> EffAttnBlockTokenizer:
        """``tokenizer`` (a Transformers tokenizer with a ``tokenizer.json``), framing blocks of ``block`` tokens."""
        if not isinstance(block, int) or isinstance(block, bool) or block < 3:
            raise ValueError(f"block={block!r}: a framed block holds an integer >= 3 tokens (a [CLS], at least one "
                             "token and a [SEP]); give the model's local_block.")
        source = tokenizer.source_tokenizer_class if isinstance(tokenizer, cls) else type(tokenizer).__name__
        return cls(tokenizer_object=tokenizer.backend_tokenizer, block=block, source_tokenizer_class=source,
                   model_max_length=tokenizer.model_max_length, padding_side=tokenizer.padding_side,
                   **tokenizer.special_tokens_map)

    def __call__(self, text=None, text_pair=None, add_special_tokens: bool = True, truncation=None,
                 max_length: int | None = None, return_special_tokens_mask: bool = False, **kwargs):
        check_single_texts(text, "text", "EffAttnBlockTokenizer", PAIRS_FIX, pair_given=text_pair is not None)
        if not add_special_tokens:  # the plain ids, unframed
            return super().__call__(text, add_special_tokens=False, truncation=truncation, max_length=max_length,
                                    return_special_tokens_mask=return_special_tokens_mask, **kwargs)
        unknown = sorted(set(kwargs) - set(PAD_OPTIONS))
        if unknown:
            raise TypeError(f"{', '.join(unknown)}: not honoured by EffAttnBlockTokenizer, which frames texts in "
                            "blocks; pass add_special_tokens=False for the tokenizer's plain call.")
        cut = truncation not in (None, False, "do_not_truncate")
        length = (max_length or self.model_max_length) if cut else None
        padded_to = {"max_length": max_length} if kwargs.get("padding") == "max_length" else {}
        return frame_texts(self, text, self.block, length, return_special_tokens_mask, **padded_to, **kwargs)

    def save_pretrained(self, save_directory, *args, **kwargs):
        """Save as a tokenizer does; ``tokenizer_config.json`` names the source tokenizer's class, so a load without
        ``trust_remote_code`` gets it (unframed), and maps ``AutoTokenizer`` to this class's file."""
        if kwargs.get("push_to_hub"):
            raise ValueError("push_to_hub: EffAttnBlockTokenizer completes its tokenizer_config.json after saving; "
                             "save the folder, then upload it (huggingface_hub.upload_folder).")
        saved = super().save_pretrained(save_directory, *args, **kwargs)
        path = os.path.join(save_directory, "tokenizer_config.json")
        with open(path, encoding="utf-8") as file:
            config = json.load(file)
        config["tokenizer_class"] = self.source_tokenizer_class
        with open(path, "w", encoding="utf-8") as file:
            file.write(json.dumps(config, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
        return saved


EffAttnBlockTokenizer.register_for_auto_class("AutoTokenizer")
