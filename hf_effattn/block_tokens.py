"""Long inputs with ``[CLS]`` and ``[SEP]`` at every block's edges, as a checkpoint read its chunks.

A model with aligned blocks (``local_block=S``, ``hf_effattn.modeling.local_blocks``) reads each block of S tokens
as its checkpoint read an input of S tokens. A RoBERTa or BERT checkpoint always saw its inputs framed by its special
tokens: ``[CLS] ... [SEP]`` (``<s> ... </s>``). A long input tokenised as usual has them only at its two ends, so the
blocks in between read text the checkpoint never saw unframed. Laid out here instead, each block is framed::

    [CLS] t_0 ... t_{S-3} [SEP] [CLS] t_{S-2} ... t_{2S-5} [SEP] ...          (the last block may be shorter)

so that, with the gate at zero, the model's outputs over each block are the checkpoint's over that chunk: the
chunked reader exactly, as users run it today (:func:`tokenize_in_blocks`). Masked-LM pretraining lays its examples
out so with ``run_mlm.py --block_special_tokens``. The framing itself is ``modeling/tokenization_effattn.py``'s, which
a saved folder's tokenizer carries (``EffAttnBlockTokenizer``): this module checks the arguments, then calls it.

    encoded = tokenize_in_blocks(tokenizer, documents, block=512, max_length=4096, padding=True,
                                 return_tensors="pt")
    outputs = model(**encoded)
"""

from __future__ import annotations

import json
import logging

from .modeling.settings import Spec, checked
from .modeling.tokenization_effattn import (
    EffAttnBlockTokenizer, check_single_texts, content_fitting, frame_texts, framed_blocks, special_tokens_mask,
)

__all__ = ["content_fitting", "framed_as_saved", "framed_blocks", "special_tokens_mask", "tokenize_in_blocks"]

logger = logging.getLogger(__name__)

# A framed block, and so a framed text, holds at least [CLS], one token and [SEP].
BLOCK_SPEC = Spec(int, minimum=3)
MAX_LENGTH_SPEC = Spec(int, minimum=3, none_means="the whole text")
FRAME_FIX = " (a [CLS], at least one token and a [SEP])"
PAIRS_FIX = "tokenise pairs with the tokenizer itself"


def tokenize_in_blocks(tokenizer, texts: str | list[str], block: int, max_length: int | None = None,
                       return_special_tokens_mask: bool = False, **pad_kwargs):
    """``texts`` tokenised with ``[CLS]``/``[SEP]`` (the tokenizer's own) at every block's edges, each text truncated
    to ``max_length`` tokens (None: whole), then padded as ``tokenizer.pad(..., **pad_kwargs)`` pads
    (``padding=True``, ``return_tensors="pt"``, ...; ``padding="max_length"`` to ``max_length``): a
    ``BatchEncoding`` with ``input_ids`` and ``attention_mask``, ready for ``model(**encoded)``, and
    ``special_tokens_mask`` (1 at every ``[CLS]``/``[SEP]``) where ``return_special_tokens_mask``, as the
    tokenizer's own option gives it. The framing is :func:`~hf_effattn.modeling.tokenization_effattn.frame_texts`.

    As the tokenizer's own call: one string gives ``[1, N]`` tensors with ``return_tensors`` (lists of N ids
    without), an empty text ``[CLS] [SEP]``; an empty list gives an empty batch (``[0, 0]`` tensors), where the
    tokenizer's own call fails. ``block`` and ``max_length`` are
    integers of at least 3 (a ``[CLS]``, a token, a ``[SEP]``); a text pair is refused (``TypeError``)."""
    check_single_texts(texts, "texts", "tokenize_in_blocks", PAIRS_FIX, pair_given="text_pair" in pad_kwargs)
    block = checked("block", block, BLOCK_SPEC, where="argument", fix=FRAME_FIX)
    max_length = checked("max_length", max_length, MAX_LENGTH_SPEC, where="argument", fix=FRAME_FIX)
    return frame_texts(tokenizer, texts, block, max_length, return_special_tokens_mask, **pad_kwargs)


def saved_framing_block(checkpoint: str) -> int | None:
    """The blocks that ``checkpoint``'s saved tokenizer frames (an ``EffAttnBlockTokenizer``'s ``block``), or None
    where it frames none (or has no tokenizer)."""
    from transformers.utils import cached_file

    path = cached_file(checkpoint, "tokenizer_config.json", _raise_exceptions_for_missing_entries=False)
    if path is None:
        return None
    with open(path, encoding="utf-8") as file:
        config = json.load(file)
    mapped = (config.get("auto_map") or {}).get("AutoTokenizer") or [""]
    return config.get("block") if str(mapped[0]).endswith(EffAttnBlockTokenizer.__name__) else None


def framed_as_saved(checkpoint: str, tokenizer, local_block: int | None):
    """``tokenizer`` (``checkpoint``'s, loaded as Transformers loads it: unframed), framing as ``checkpoint``'s
    saved tokenizer did where the model it goes with has those blocks (``local_block``); with other blocks or none,
    unframed, with a one-line warning."""
    block = saved_framing_block(checkpoint)
    if block is None:
        return tokenizer
    if block != local_block:
        logger.warning(f"{checkpoint}'s tokenizer frames blocks of {block} tokens, which the converted model "
                       f"(local_block={local_block}) does not read: its tokenizer is saved unframed. Convert with "
                       f"--local_block {block} to keep the framing.")
        return tokenizer
    return EffAttnBlockTokenizer.from_tokenizer(tokenizer, block)
