"""The measures' parts against references computed another way: the standard error over documents, the fixed
masking, the long-context words and the retrieval hits."""

from __future__ import annotations

import math
import random
import statistics

import pytest
import torch

from hf_effattn.evaluation.fixed_masking import IGNORED, mask_document
from hf_effattn.evaluation.long_context_words import long_context_targets
from hf_effattn.evaluation.retrieval import hits, passage_start
from hf_effattn.evaluation.standard_error import Estimate, pooled


def test_with_one_count_a_document_the_error_is_the_standard_error_of_the_mean():
    values = [0.5, 1.0, 2.5, 4.0]
    estimate = pooled(values, [1] * 4)
    assert estimate.value == pytest.approx(statistics.mean(values))
    assert estimate.standard_error == pytest.approx(statistics.stdev(values) / 2)


def test_the_pooled_value_weighs_tokens_and_its_error_is_the_ratio_estimators():
    totals, counts = [3.0, 10.0, 0.0], [2, 4, 0]  # the last document has no token of this kind
    estimate = pooled(totals, counts)
    assert estimate.value == pytest.approx(13 / 6)
    residuals = [3 - 13 / 6 * 2, 10 - 13 / 6 * 4, 0.0]
    assert estimate.standard_error == pytest.approx(math.sqrt(3 / 2 * sum(r * r for r in residuals)) / 6)


def test_an_undefined_estimate_is_not_a_number_and_prints_as_such():
    assert math.isnan(pooled([0.0, 0.0], [0, 0]).value) and math.isnan(pooled([2.0], [4]).standard_error)
    assert pooled([2.0], [4]).format(3) == "0.500" and pooled([], []).format(3) == "-"
    assert Estimate(1.23456, 0.01).format(2) == "1.23 ± 0.01" and Estimate(0.004, 0.01).format(3, signed=True) == \
        "+0.004 ± 0.010"


def test_the_masking_is_berts_and_depends_on_the_seed_and_the_document_alone():
    ids = torch.randint(5, 100, (4000,), generator=torch.Generator().manual_seed(0))
    inputs, labels = mask_document(ids, 1, 100, seed=3, index=7)
    targets = labels != IGNORED
    assert torch.equal(labels[targets], ids[targets]) and torch.equal(inputs[~targets], ids[~targets])
    assert 0.13 < targets.float().mean() < 0.17
    assert 0.75 < (inputs[targets] == 1).float().mean() < 0.85  # the mask token
    again = mask_document(ids, 1, 100, seed=3, index=7)
    assert torch.equal(again[0], inputs) and torch.equal(again[1], labels)
    assert not torch.equal(mask_document(ids, 1, 100, seed=3, index=8)[1], labels)
    assert not torch.equal(mask_document(ids, 1, 100, seed=4, index=7)[1], labels)


def long_context_reference(inputs: list[int], labels: list[int], chunk: int) -> list[bool]:
    """The definition, word for word: a target whose word is in the input before its chunk, and nowhere else in it."""
    flags = []
    for position, label in enumerate(labels):
        if label == IGNORED:
            continue
        own = range(position // chunk * chunk, min(len(inputs), (position // chunk + 1) * chunk))
        earlier = any(inputs[other] == label for other in range(own.start))
        flags.append(earlier and not any(inputs[other] == label for other in own if other != position))
    return flags


@pytest.mark.parametrize("seed", range(5))
def test_the_long_context_words_are_those_of_the_definition(seed):
    generator = random.Random(seed)
    length, chunk = generator.randint(60, 100), generator.randint(4, 8)
    inputs = [generator.randrange(12) for _ in range(length)]
    labels = [generator.randrange(12) if generator.random() < 0.3 else IGNORED for _ in range(length)]
    found = long_context_targets(torch.tensor(inputs), torch.tensor(labels), chunk)
    assert found.tolist() == long_context_reference(inputs, labels, chunk)
    assert any(found.tolist()) and not all(found.tolist())


def test_a_query_hits_when_its_own_document_is_the_most_similar_by_cosine():
    documents = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    queries = torch.tensor([[10.0, 1.0], [0.1, 0.9], [0.0, 3.0]])  # the third is closest to the second document
    assert hits(documents, queries) == [True, True, False]


def test_a_passage_starts_past_the_first_chunk_and_ends_within_the_read_text():
    starts = [passage_start(100, 30, 10, seed=0, index=index) for index in range(200)]
    assert min(starts) == 30 and max(starts) == 90
    assert starts == [passage_start(100, 30, 10, seed=0, index=index) for index in range(200)]
