#!/usr/bin/env python
"""What the frozen encoders know of long documents: a linear probe of their subsystem, and retrieval of a passage.

Each *reader* (``READERS``: a model and how it reads a document) embeds every document once, its last hidden state
averaged over the tokens it read, and the result feeds two measures, both without training the encoder:

``probe``
    classification by subsystem, the documents of every subsystem with at least ``MIN_PER_LABEL`` documents (all
    splits of ``documents.csv``; 21 subsystems): a logistic regression (standardised features, L2) in stratified
    ``FOLDS``-fold cross-validation, every document predicted once by a fit that did not see it. Accuracy over all
    documents, its binomial standard error, and each document's correctness (for paired comparisons). With
    ``--min_tokens 1024`` the probe alone, over the documents of 1,024 word-pieces or more (the ``probe_extra``
    split too: about twice as many documents, a smaller standard error).
``retrieval``
    a passage of ``PASSAGE`` word-pieces copied from deep inside each document (from a fixed random offset in
    ``DEEP[length]``: past 512, so truncation cannot see it) is embedded alone; it must find its document among all
    the documents by cosine similarity. Recall@1 and the per-passage hits.

At 2,048 tokens the documents are the probe's; at 8,192 the ``LONG_DOCUMENTS`` of at least 8,192 word-pieces (every
subsystem), read at 8,192 by the models extended once more (``from_pretrained(..., max_length=8192)``, positions
copied again, no training), retrieval only.

Readers: ``sdpa-512`` (MiniLM as shipped, the first 512 tokens), ``sdpa-512-chunks`` (MiniLM over consecutive
512-token chunks of the same tokens, chunk embeddings averaged: what users do today, at linear cost), and each row
of ``rows.ROWS`` at a stage of ``pretrain.py`` (``<row>@<stage>``), hybrids also with their mechanism's part
switched off (``<row>@<stage>-window-alone``). Results: ``results/representations/<reader>_<length>.json``
(``<reader>_2048_probe1024.json`` with ``--min_tokens 1024``).

    python research/long_documents/represent.py --readers sdpa-512 sdpa-512-chunks sdpa@extend kerformer-w128@mlm
    python research/long_documents/represent.py --readers kerformer-w128@mlm --length 8192
    python research/long_documents/represent.py --readers sdpa@mlm kerformer-w128@mlm --min_tokens 1024
"""

from __future__ import annotations

import argparse
import collections
import csv
import random
import time
from dataclasses import dataclass

from build_corpus import PROBE_MIN_TOKENS, SPLITS
from rows import LONG, ROWS, SHORT
from runs import DATA, default_device, kept, read_jsonl, set_threads, write_result

KIND = "representations"
MIN_PER_LABEL, FOLDS, PASSAGE, SEED = 10, 10, 64, 0
DEEP = {2048: (1100, 1900), 8192: (4000, 8000)}  # where the retrieval passages start, by reading length
STAGES = ("extend", "transfer", "mlm")


@dataclass(frozen=True)
class Reader:
    """A model folder and how it reads a document: its first ``limit`` tokens (None: as many as the measure's
    length), ``chunk`` tokens at a time (None: all at once), with the hybrid layers' ``part`` alone (None: both),
    framed at every aligned block of ``block`` tokens (None: [CLS] and [SEP] at the ends only)."""

    name: str
    folder: str
    limit: int | None = None
    chunk: int | None = None
    part: str | None = None
    block: int | None = None


def reader(name: str) -> Reader:
    """The reader called ``name`` (see the module docstring)."""
    from pretrain import HEAD_FOLDER, folder_of

    if name == "sdpa-512":
        return Reader(name, str(HEAD_FOLDER), limit=SHORT)
    if name == "sdpa-512-chunks":
        return Reader(name, str(HEAD_FOLDER), chunk=SHORT)
    if name == "sdpa-512-chunks@mlm":
        return Reader(name, str(folder_of("sdpa", "mlm_512")), chunk=SHORT)
    row, _, stage = name.partition("@")
    stage, _, part = stage.partition("-")
    if row not in ROWS or stage not in STAGES or part not in ("", "window-alone"):
        raise SystemExit(f"error: unknown reader {name!r}: sdpa-512, sdpa-512-chunks, sdpa-512-chunks@mlm, or "
                         f"<row>@<stage>[-window-alone] with a row of {', '.join(ROWS)} and a stage of "
                         f"{', '.join(STAGES)}")
    return Reader(name, str(folder_of(row, stage)), part="window" if part else None,
                  block=ROWS[row].block if ROWS[row].framed else None)


def documents(tokenizer, length: int, min_tokens: int = LONG) -> tuple[list[list[int]], list[str]]:
    """The documents of a reading length (see the module docstring): their word-piece ids and labels. At ``LONG``,
    the listed documents of at least ``min_tokens`` word-pieces of every subsystem with ``MIN_PER_LABEL`` such."""
    with open(DATA / "documents.csv", encoding="utf-8") as file:
        listed = [row for row in csv.DictReader(file) if int(row["tokens"]) >= min_tokens]
    counts = collections.Counter(row["label"] for row in listed)
    splits = [split for split in SPLITS if split != "probe_extra" or min_tokens < LONG]
    rows = [row for split in splits for row in read_jsonl(split)]
    ids = tokenizer([row["text"] for row in rows], add_special_tokens=False, verbose=False)["input_ids"]
    if length == LONG:
        chosen = [i for i, row in enumerate(rows) if counts[row["label"]] >= MIN_PER_LABEL]
    else:
        chosen = [i for i, document in enumerate(ids) if len(document) >= length]
    return [ids[i] for i in chosen], [rows[i]["label"] for i in chosen]


def passages(ids: list[list[int]], length: int) -> list[list[int]]:
    """Each document's passage: ``PASSAGE`` ids from a seeded offset in ``DEEP[length]`` (within the document)."""
    low, high = DEEP[length]
    generator = random.Random(SEED)
    taken = []
    for document in ids:
        start = generator.randrange(low, min(high, len(document) - PASSAGE))
        taken.append(document[start:start + PASSAGE])
    return taken


def embed(model, tokenizer, ids: list[int], length: int, chunk: int | None, block: int | None = None):
    """The mean of the last hidden state over ``[CLS] ids[:length - 2] [SEP]``, or, with ``chunk``, the mean of the
    chunk embeddings of ``ids[:length - 2]`` read ``chunk`` tokens at a time (each with its own [CLS] and [SEP]), or,
    with ``block``, over the ids framed at every block of ``block`` (``hf_effattn.block_tokens``: at init, with
    blocks of the chunks' size, the chunks' embedding)."""
    import torch

    from hf_effattn.block_tokens import content_fitting, framed_blocks

    if block is not None:
        framed = framed_blocks(ids[:content_fitting(length, block)], block, tokenizer.cls_token_id,
                               tokenizer.sep_token_id)
        return model(torch.tensor([framed], device=model.device)).last_hidden_state[0].mean(0).float().cpu()
    content = ids[:length - 2] if chunk is None else ids[:(length // chunk) * (chunk - 2)]
    size = len(content) if chunk is None else chunk - 2
    pieces = [content[i:i + size] for i in range(0, len(content), size)]
    vectors = []
    for piece in pieces:
        input_ids = torch.tensor([[tokenizer.cls_token_id, *piece, tokenizer.sep_token_id]], device=model.device)
        vectors.append(model(input_ids).last_hidden_state[0].mean(0).float().cpu())
    return torch.stack(vectors).mean(0)


def load(chosen: Reader, length: int):
    from transformers import AutoTokenizer

    from hf_effattn import EffAttnRobertaModel

    extension = {} if chosen.chunk or chosen.limit or length == LONG else {"max_length": length}
    model = EffAttnRobertaModel.from_pretrained(chosen.folder, **extension).to(default_device()).eval()
    return model, AutoTokenizer.from_pretrained(chosen.folder)


def probe(features, labels: list[str]) -> dict:
    """Stratified ``FOLDS``-fold cross-validated logistic regression: accuracy, its standard error, correctness."""
    import numpy
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold, cross_val_predict
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    classifier = make_pipeline(StandardScaler(), LogisticRegression(C=1.0, max_iter=3000))
    folds = StratifiedKFold(FOLDS, shuffle=True, random_state=SEED)
    predicted = cross_val_predict(classifier, features, labels, cv=folds)
    correct = (predicted == numpy.array(labels)).astype(int)
    accuracy = float(correct.mean())
    return {"accuracy": accuracy, "standard_error": float((accuracy * (1 - accuracy) / len(correct)) ** 0.5),
            "documents": len(correct), "labels": len(set(labels)), "correct": correct.tolist()}


def retrieval(documents_matrix, queries) -> dict:
    """Recall@1 of each query against every document (cosine similarity); the per-query hits."""
    import torch

    similarity = torch.nn.functional.normalize(queries, dim=-1) @ torch.nn.functional.normalize(documents_matrix,
                                                                                             dim=-1).T
    hits = (similarity.argmax(-1) == torch.arange(len(queries))).int()
    recall = float(hits.float().mean())
    return {"recall_at_1": recall, "standard_error": float((recall * (1 - recall) / len(hits)) ** 0.5),
            "queries": len(hits), "hits": hits.tolist()}


def measure(name: str, length: int, min_tokens: int = LONG, adjust=None) -> dict:
    """The reader's probe (at ``LONG``) and retrieval; with ``min_tokens`` below ``LONG``, its probe alone over the
    documents that long (the retrieval's passages lie past 1,100 tokens). ``adjust(model)``: a context manager that
    changes the model while it reads (``memory_mass.py``'s)."""
    import contextlib

    import torch

    from hf_effattn.models.hybrid_parts import only_part

    chosen = reader(name)
    model, tokenizer = load(chosen, length)
    ids, labels = documents(tokenizer, length, min_tokens)
    started = time.perf_counter()
    with torch.no_grad(), only_part(model, chosen.part), (adjust or contextlib.nullcontext)(model):
        document_vectors = torch.stack([embed(model, tokenizer, document, chosen.limit or length, chosen.chunk,
                                              chosen.block) for document in ids])
        query_vectors = torch.stack([embed(model, tokenizer, passage, PASSAGE + 2, None)
                                     for passage in passages(ids, length)]) if min_tokens == LONG else None
    result = {"reader": name, "length": length, "folder": chosen.folder, "limit": chosen.limit,
              "chunk": chosen.chunk, "part": chosen.part, "framed_block": chosen.block,
              "encode_seconds": round(time.perf_counter() - started, 1),
              "threads": 1, "min_tokens": min_tokens}
    if query_vectors is not None:
        result["retrieval"] = retrieval(document_vectors, query_vectors)
    if length == LONG:
        result["probe"] = probe(document_vectors.numpy(), labels)
    return result


def result_name(name: str, length: int, min_tokens: int) -> str:
    return f"{name}_{length}" + (f"_probe{min_tokens}" if min_tokens < LONG else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--readers", nargs="+", required=True)
    parser.add_argument("--length", type=int, choices=sorted(DEEP), default=LONG)
    parser.add_argument("--min_tokens", type=int, choices=(PROBE_MIN_TOKENS, LONG), default=LONG,
                        help=f"{PROBE_MIN_TOKENS}: the probe alone, over the documents of {PROBE_MIN_TOKENS}+ "
                             "word-pieces (at 2,048)")
    parser.add_argument("--again", action="store_true", help="measure a reader even where its result exists")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    if args.min_tokens < LONG and args.length != LONG:
        parser.error(f"--min_tokens {args.min_tokens} is a probe over documents read at {LONG}: drop --length")
    set_threads(args.threads)
    for name in args.readers:
        reader(name)  # every name checked before the first runs
    for name in args.readers:
        result = result_name(name, args.length, args.min_tokens)
        if not kept(KIND, result, args.again):
            print(f"== {result}", flush=True)
            write_result(KIND, result, measure(name, args.length, args.min_tokens))


if __name__ == "__main__":
    main()
