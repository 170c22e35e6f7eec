"""The masked-LM training files: ``data/mlm_train.jsonl``, or for the pieces lever its documents cut into pieces of
about ``size`` word-pieces, shuffled.

Pretrained at 8,192 tokens on ``mlm_train`` as it is, each masked-LM step reads one block of 8,192 consecutive
tokens of the concatenated documents: one document or a few (median 3,573 word-pieces), where a step at 2,048 reads
four blocks drawn apart. A row with ``pieces`` (``rows.Row``) is pretrained on this file instead: each document cut
at word starts into pieces of ``size`` word-pieces or a few more (its last piece what is left), the pieces of every
document shuffled together (seed ``PIECES_SEED``), so that a block of 8,192 reads pieces of about four documents,
drawn apart as the four blocks of a step at 2,048 are, while the model still reads 8,192 tokens at once. (Users get
the same from ``run_mlm.py --shuffled_pieces 2048``, shuffled with the run's seed; the study keeps its own file, the
one it measured.)

    data/mlm_train_pieces<size>.jsonl      built once from data/mlm_train.jsonl, one row a piece (its document's label)
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from hf_effattn.finetuning.text_pieces import cut_at_word_starts
from rows import Row
from runs import DATA, minilm_folder, read_jsonl

PIECES_SEED = 20261128


def training_file(row: Row | None) -> Path:
    """``row``'s masked-LM training file: ``data/mlm_train.jsonl``, or its pieces (:func:`pieces_file`)."""
    return DATA / "mlm_train.jsonl" if row is None or row.pieces is None else pieces_file(row.pieces)


def pieces_file(size: int) -> Path:
    """The training file of pieces of ``size`` word-pieces (module docstring), built where it is missing."""
    path = DATA / f"mlm_train_pieces{size}.jsonl"
    if not path.exists():
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(minilm_folder())
        pieces = [{**row, "text": piece} for row in read_jsonl("mlm_train")  # each row's other columns kept, so
                  for piece in cut_at_word_starts(row["text"], tokenizer, size)]  # that it loads beside mlm_heldout
        random.Random(PIECES_SEED).shuffle(pieces)
        building = path.with_suffix(".partial")
        building.write_text("".join(json.dumps(piece) + "\n" for piece in pieces), encoding="utf-8")
        building.replace(path)  # whole or absent: a stopped build leaves no half file behind
    return path
