"""``evaluate``: a masked-LM model and the chunked reader of the same checkpoint, side by side, on one's documents.

    report = evaluate("roberta-blocks-4096", "documents.jsonl")
    print(report.table())
    report.write_json("results.json")

Each document's content ids (without special tokens), truncated to what the model reads in ``max_length`` tokens, are
read by both readers (:mod:`.readers`: the model whole; the chunks of ``chunk_length``), and scored three ways:

* the masked-LM loss over the targets of a fixed masking (:mod:`.fixed_masking`: the same tokens for every model);
* the loss over the targets only long context can see (:mod:`.long_context_words`);
* passage retrieval, recall@1 (:mod:`.retrieval`), on the unmasked documents.

Every document must hold more than one chunk, and a passage past it: at least ``chunk_length - 2 +
passage_length`` content ids. Everything a bad argument or document could stop is checked before the first document
is read.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import torch

from ..block_tokens import content_fitting
from ..version import __version__
from .documents import read_documents
from .fixed_masking import mask_document
from .long_context_words import long_context_targets
from .masked_lm_loss import target_losses
from .masked_lm_model import load_masked_lm, model_block, reading_lengths
from .readers import readers_of
from .report import Comparison, EvaluationReport, compared
from .retrieval import PASSAGE_LENGTH, hits, passage_start


def evaluate(model_or_path, documents, tokenizer=None, max_length: int | None = None, chunk_length: int | None = None,
             passage_length: int = PASSAGE_LENGTH, seed: int = 0, device: str | None = None,
             progress: bool = True) -> EvaluationReport:
    """Evaluate ``model_or_path`` (an ``EffAttnRobertaForMaskedLM`` with its ``tokenizer``, or the folder or Hub id of
    a masked-LM checkpoint) on ``documents`` (a ``.jsonl`` or text file, :func:`read_documents`, or a list of texts)
    beside the chunked reader of the same checkpoint. ``max_length``: the tokens the model reads of each document
    (default: its longest input); ``chunk_length``: the chunks' (default: the checkpoint's own length,
    :func:`~.masked_lm_model.default_chunk_length`); ``seed``: the masking and the passages; ``device``: default
    ``cuda`` where there is one; ``progress``: a progress bar on stderr."""
    from_file = isinstance(documents, (str, os.PathLike))
    texts = read_documents(documents) if from_file else listed_texts(documents)
    if isinstance(passage_length, bool) or not isinstance(passage_length, int) or passage_length < 1:
        raise ValueError(f"passage_length={passage_length!r}: give a positive number of tokens.")
    model, tokenizer = load_masked_lm(model_or_path, tokenizer)
    max_length, chunk_length = reading_lengths(model, max_length, chunk_length)
    ids = document_ids(tokenizer, texts, content_limit(model, max_length, chunk_length, passage_length),
                       chunk_length - 2 + passage_length)
    model.to(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    settings = {"model": model.name_or_path if isinstance(model_or_path, torch.nn.Module) else str(model_or_path),
                "documents": len(ids), "documents_file": str(documents) if from_file else None,
                "max_length": max_length, "chunk_length": chunk_length, "local_block": model_block(model),
                "passage_length": passage_length, "seed": seed, "device": str(model.device), "hf_effattn": __version__}
    with torch.no_grad():
        return EvaluationReport(settings, scores(model, tokenizer, ids, chunk_length, passage_length, seed, progress))


def listed_texts(documents) -> list[str]:
    """``documents`` given as texts: a list (or tuple) of strings."""
    if not isinstance(documents, (list, tuple)) or not all(isinstance(text, str) for text in documents):
        raise TypeError(f"documents: expected a file's path or a list of texts, got {type(documents).__name__}.")
    return list(documents)


def content_limit(model, max_length: int, chunk_length: int, passage_length: int) -> int:
    """The content ids the model reads in ``max_length`` tokens (framed at every block, or at the two ends); a
    ``ValueError`` where they cannot hold a chunk and a passage past it."""
    block = model_block(model)
    limit = content_fitting(max_length, block) if block else max_length - 2
    needed = chunk_length - 2 + passage_length
    if limit < needed:
        longer = "a larger max_length" if max_length < model.config.attention_max_length else \
            "a model converted to read longer (hf-effattn convert --local_block --max_length 4096)"
        raise ValueError(f"max_length={max_length} reads {limit} tokens of text, fewer than a chunk and a passage "
                         f"past it ({needed}): give {longer}, or a smaller chunk_length or passage_length.")
    return limit


def document_ids(tokenizer, texts: list[str], limit: int, needed: int) -> list[torch.Tensor]:
    """Each document's content ids, truncated to ``limit``; a ``ValueError`` naming the first one with fewer than
    ``needed``, or where there are fewer than two documents (retrieval needs another to confuse a passage's with)."""
    if len(texts) < 2:
        raise ValueError(f"documents: {len(texts)} given, and passage retrieval needs at least two: give more.")
    tokenized = tokenizer(texts, add_special_tokens=False, verbose=False)["input_ids"]
    for number, ids in enumerate(tokenized, start=1):
        if len(ids) < needed:
            raise ValueError(f"document {number} has {len(ids)} tokens, fewer than one chunk and a passage past it "
                             f"({needed}): long context has nothing to add to it: drop it, or give a smaller "
                             "chunk_length.")
    return [torch.tensor(ids[:limit]) for ids in tokenized]


@dataclass
class Readings:
    """What one reader gave, document by document: the loss at each target ``[M_d]``, and the embedding of the
    document and of its passage ``[C]``."""

    losses: list[torch.Tensor] = field(default_factory=list)
    documents: list[torch.Tensor] = field(default_factory=list)
    passages: list[torch.Tensor] = field(default_factory=list)

    def hits(self) -> list[torch.Tensor]:
        """Each passage's hit (1 or 0) as a 1-item tensor."""
        found = hits(torch.stack(self.documents), torch.stack(self.passages))
        return [torch.tensor([hit], dtype=torch.float) for hit in found]


def scores(model, tokenizer, documents: list[torch.Tensor], chunk_length: int, passage_length: int, seed: int,
           progress: bool) -> dict[str, Comparison]:
    """Read every document with both readers and compare them on the three measures."""
    from tqdm.auto import tqdm

    readers = readers_of(model, chunk_length)
    chunk, frame = chunk_length - 2, (tokenizer.cls_token_id, tokenizer.sep_token_id)
    readings, far = {reader.name: Readings() for reader in readers}, []
    for index, ids in enumerate(tqdm(documents, desc="Reading documents", unit="document", disable=not progress)):
        inputs, labels = mask_document(ids, tokenizer.mask_token_id, len(tokenizer), seed, index)
        far.append(long_context_targets(inputs, labels, chunk))
        start = passage_start(len(ids), chunk, passage_length, seed, index)
        for reader in readers:
            read = readings[reader.name]
            read.losses.append(target_losses(model, reader.hidden_states(model, inputs, *frame), labels))
            read.documents.append(reader.hidden_states(model, ids, *frame).mean(0).cpu())
            read.passages.append(reader.hidden_states(model, ids[start:start + passage_length], *frame).mean(0).cpu())
    mine, theirs = readings["model"], readings["chunks"]
    far_losses = [[loss[where] for loss, where in zip(each.losses, far)] for each in (mine, theirs)]
    return {
        "masked_lm_loss": compared("masked-LM loss (nats)", "masked tokens", mine.losses, theirs.losses),
        "long_context_loss": compared("loss on long-context words (nats)", "masked tokens", *far_losses),
        "retrieval_recall_at_1": compared("passage retrieval (recall@1)", "passages", mine.hits(), theirs.hits()),
    }
