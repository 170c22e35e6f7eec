#!/usr/bin/env python
"""Why a kernelized block hybrid finds fewer passages at 8,192 tokens than at 2,048: its memory's mass.

Beside aligned blocks a kernelized mechanism (Kerformer) shares one normaliser with the block's softmax
(``modeling/shared_normaliser.py``): with the gate ``sigma``, a query's memory has the share

    share = sigma phi(q).z / ((1 - sigma) + sigma phi(q).z)       z = the sum of the key features outside its block

of its attention, and ``z`` sums over every other block: 3 at 2,048 tokens, 15 at 8,192, where a row pretrained at
2,048 is only extended. For a Kerformer block row this measures

* ``share``: each layer's share, the mean over heads and tokens of 8 of the documents that retrieval reads at 8,192,
  read at 2,048 (their first tokens, as in pretraining) and at 8,192;
* ``retrieval_held``: retrieval at 8,192 (``represent.py``'s) with every gate's odds ``sigma / (1 - sigma)``
  multiplied by ``held_factor`` (3/15 for a row pretrained at 2,048), which holds each query's memory mass, on
  average, at what the model saw in pretraining (``results/representations/`` has the same measure as trained and
  with the memory off); none for a row pretrained at 8,192, whose mass is its pretraining's.

Result: ``results/memory_mass/<row>.json``.

    python research/long_documents/memory_mass.py --rows kerformer-b512-direct-gate-lr0.1-mlm160
"""

from __future__ import annotations

import argparse
import math
from contextlib import contextmanager

from rows import BLOCK, LONG, LONGEST, ROWS
from runs import measure_each, set_threads

KIND = "memory_mass"
READ_AT = LONGEST
SHARE_DOCUMENTS = 8


def held_factor(row) -> float:
    """The other blocks a query's memory sums over in ``row``'s pretraining over those at ``READ_AT``: 3/15 for a row
    pretrained at 2,048, 1 for one pretrained at 8,192."""
    return (row.length // BLOCK - 1) / (READ_AT // BLOCK - 1)


@contextmanager
def gate_odds_scaled(model, factor: float):
    """Within the block every hybrid layer's gate odds ``sigma / (1 - sigma)`` are ``factor`` times their own; after
    it, their own again (the very values)."""
    from hf_effattn.models.hybrid_parts import hybrid_layers

    logits = [layer.window.mechanism_logit for layer in hybrid_layers(model)]
    saved = [logit.detach().clone() for logit in logits]
    for logit, own in zip(logits, saved):
        logit.data = own + math.log(factor)  # the logit is the log of the odds
    try:
        yield
    finally:
        for logit, own in zip(logits, saved):
            logit.data = own


def memory_shares(name: str, length: int) -> list[float]:
    """Each layer's mean memory share (module docstring) over ``SHARE_DOCUMENTS`` documents read at ``length``."""
    import torch

    from hf_effattn.models.hybrid_parts import hybrid_layers
    from hf_effattn.modeling import shared_normaliser
    from represent import documents, embed, load, reader

    chosen = reader(name)
    model, tokenizer = load(chosen, length)
    weights = [layer.window.mechanism_weight()[:, None, None].double() for layer in hybrid_layers(model)]
    normalisers, memory_terms = [], shared_normaliser.memory_terms

    def recorded(*args, **options):
        numerator, normaliser = memory_terms(*args, **options)
        normalisers.append(normaliser.double())
        return numerator, normaliser

    totals = [0.0] * len(weights)
    ids, _ = documents(tokenizer, READ_AT)
    shared_normaliser.memory_terms = recorded
    try:
        with torch.no_grad():
            for document in ids[:SHARE_DOCUMENTS]:
                normalisers.clear()
                embed(model, tokenizer, document, length, None, chosen.block)
                for layer, (weight, normaliser) in enumerate(zip(weights, normalisers, strict=True)):
                    memory = weight * normaliser  # [B, h, N, 1]
                    totals[layer] += float((memory / (1 - weight + memory)).mean()) / SHARE_DOCUMENTS
    finally:
        shared_normaliser.memory_terms = memory_terms
    return totals


def measure(row: str) -> dict:
    from represent import measure as retrieval_of

    name = f"{row}@mlm"
    shares = {str(length): memory_shares(name, length) for length in (LONG, READ_AT)}
    factor = held_factor(ROWS[row])
    held = retrieval_of(name, READ_AT, adjust=lambda model: gate_odds_scaled(model, factor))["retrieval"] \
        if factor < 1 else None
    return {"row": row, "held_factor": factor, "share": shares, "retrieval_held": held}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", nargs="+", required=True, choices=[
        name for name, row in ROWS.items() if row.block and row.attention == "kerformer"
        and row.settings.get("shared_normaliser") is True])  # a gated memory's share is its gate
    parser.add_argument("--again", action="store_true", help="measure a row even where its result exists")
    args = parser.parse_args()
    set_threads(1)
    measure_each(KIND, args.rows, measure, args.again)


if __name__ == "__main__":
    main()
