"""Passage retrieval: can a reader's document embeddings tell which document a passage came from?

Each document gives one query: a passage of ``passage_length`` content ids from past its first chunk (at an offset
drawn from the seed and the document's index alone, within what the readers read), embedded alone. A reader embeds
every document (and every passage) as the mean of its last hidden state over the content tokens; a query is a *hit*
when, by cosine similarity, the closest document embedding is its own. Recall@1 is the share of hits.
"""

from __future__ import annotations

import random

import torch

PASSAGE_LENGTH = 64  # content ids of a query (the default), as the long-document study's


def passage_start(read: int, chunk: int, passage_length: int, seed: int, index: int) -> int:
    """Where document ``index``'s passage starts among its ``read`` content ids: an offset in ``[chunk, read -
    passage_length]`` drawn from ``seed`` and ``index`` alone."""
    return random.Random(f"{seed}-{index}").randint(chunk, read - passage_length)


def hits(documents: torch.Tensor, queries: torch.Tensor) -> list[bool]:
    """For each query ``[D, C]`` (query ``i`` from document ``i`` of ``documents`` ``[D, C]``): whether its most
    similar document by cosine similarity is its own."""
    similarity = torch.nn.functional.normalize(queries, dim=-1) @ torch.nn.functional.normalize(documents, dim=-1).T
    return (similarity.argmax(-1) == torch.arange(len(queries))).tolist()
