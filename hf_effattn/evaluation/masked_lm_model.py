"""The model an evaluation reads with: a masked-LM model of this package, or the folder or Hub id of one (a converted
folder, or a plain BERT or RoBERTa masked-LM checkpoint, loaded with its own softmax attention), with its tokenizer,
and the lengths it reads at.

The *chunk length* is the checkpoint's own length, the one its chunked reader reads at: the model's ``local_block``
where it has aligned blocks; else the period its positions repeat when they were extended by copying and not
trained since (a converted folder's source length, e.g. 512); else the model's longest input (a plain checkpoint,
whose chunks are then the model itself).
"""

from __future__ import annotations

import os

from ..modeling.modeling_effattn_roberta import EffAttnRobertaForMaskedLM

HEAD_PREFIX = "lm_head."


def load_masked_lm(model_or_path, tokenizer=None):
    """``(model, tokenizer)``: the model in eval mode, its tokenizer (loaded from the path where not given). Raises a
    ``ValueError`` for a checkpoint without a masked-LM head and a ``TypeError`` for another kind of model."""
    if isinstance(model_or_path, EffAttnRobertaForMaskedLM):
        if tokenizer is None:
            raise TypeError("tokenizer=None: with a model object, pass its tokenizer too (or pass the model's folder "
                            "instead).")
        return model_or_path.eval(), checked_tokenizer(tokenizer)
    if not isinstance(model_or_path, (str, os.PathLike)):
        raise TypeError(f"model_or_path: expected an EffAttnRobertaForMaskedLM or the path or Hub id of a masked-LM "
                        f"checkpoint, got {type(model_or_path).__name__}: save it with save_pretrained and pass its "
                        "folder.")
    from transformers import AutoTokenizer

    path = str(model_or_path)
    model, info = EffAttnRobertaForMaskedLM.from_pretrained(path, output_loading_info=True)
    missing = sorted(key for key in info["missing_keys"] if key.startswith(HEAD_PREFIX))
    if missing:
        raise ValueError(f"{path} has no masked-LM head (it lacks {', '.join(missing)}): evaluate a masked-LM "
                         "checkpoint, or train a head first (run_mlm.py --new_mlm_head --train_head_only).")
    return model.eval(), checked_tokenizer(tokenizer or AutoTokenizer.from_pretrained(path))


def checked_tokenizer(tokenizer):
    """``tokenizer``, which must have the ``[CLS]``, ``[SEP]`` and mask tokens a masked-LM evaluation frames and
    masks with."""
    absent = [name for name in ("cls_token_id", "sep_token_id", "mask_token_id") if getattr(tokenizer, name) is None]
    if absent:
        raise ValueError(f"The tokenizer has no {', '.join(absent)}: give the masked-LM checkpoint's own tokenizer.")
    return tokenizer


def model_block(model) -> int | None:
    """The model's aligned blocks (``local_block``), or None."""
    return model.config.local_block


def default_chunk_length(model) -> int:
    """The checkpoint's own length (see the module docstring)."""
    return model_block(model) or model.position_period() or model.config.attention_max_length


def reading_lengths(model, max_length: int | None, chunk_length: int | None) -> tuple[int, int]:
    """``(max_length, chunk_length)``, each defaulted (the model's longest input; :func:`default_chunk_length`) and
    checked against the model: a ``ValueError`` naming the argument otherwise."""
    longest = model.config.attention_max_length
    max_length = longest if max_length is None else max_length
    chunk_length = default_chunk_length(model) if chunk_length is None else chunk_length
    if not 3 <= max_length <= longest:
        raise ValueError(f"max_length={max_length}: the model reads 3 to {longest} tokens: give a length in that "
                         "range (or none for its longest).")
    if not 3 <= chunk_length <= max_length:
        raise ValueError(f"chunk_length={chunk_length}: chunks are framed by [CLS] and [SEP] and read within "
                         f"max_length={max_length}: give a length from 3 to {max_length}.")
    return max_length, chunk_length
