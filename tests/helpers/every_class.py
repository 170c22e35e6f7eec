"""Every model class of both families, built tiny with a mechanism, and inputs for it: the cases of the tests that
check, for our classes, what Transformers' common model tests check for theirs (``tests/models/
test_loading_like_transformers.py``, ``tests/models/test_common_model_behaviours.py``)."""

from __future__ import annotations

import pytest
import torch

import hf_effattn
from helpers.models import pixel_values, text_config, text_inputs, vision_config

TEXT_CLASSES = [hf_effattn.EffAttnRobertaModel, hf_effattn.EffAttnRobertaForMaskedLM,
                hf_effattn.EffAttnRobertaForSequenceClassification, hf_effattn.EffAttnRobertaForTokenClassification,
                hf_effattn.EffAttnRobertaForQuestionAnswering, hf_effattn.EffAttnRobertaForMultipleChoice]
VISION_CLASSES = [hf_effattn.EffAttnViTModel, hf_effattn.EffAttnViTForImageClassification,
                  hf_effattn.EffAttnViTForMaskedImageModeling]
CLASSES = TEXT_CLASSES + VISION_CLASSES
MECHANISMS = ["kerformer", "singularformer", "dba", "psf", "sdpa"]
MECHANISM_HEADS = [hf_effattn.EffAttnRobertaForMaskedLM, hf_effattn.EffAttnViTForImageClassification]
CHOICES = 2  # of a multiple-choice example


def is_vision(model_class) -> bool:
    return model_class.main_input_name == "pixel_values"


def every_class() -> list:
    """``(model_class, mechanism)`` for every class, the mechanisms of :data:`MECHANISMS` taken in turn."""
    return [case(model_class, MECHANISMS[i % len(MECHANISMS)]) for i, model_class in enumerate(CLASSES)]


def every_class_and_mechanism() -> list:
    """:func:`every_class`, and every mechanism on a text head and on a vision head (the cases of a check that
    depends on the mechanism, at the run time of fewer than every pair)."""
    pairs = [(model_class, mechanism) for model_class in MECHANISM_HEADS for mechanism in MECHANISMS]
    taken = [(param.values[0], param.values[1]) for param in every_class()]
    return every_class() + [case(*pair) for pair in pairs if pair not in taken]


def case(model_class, mechanism: str):
    return pytest.param(model_class, mechanism, id=f"{model_class.__name__}-{mechanism}")


def config_for(model_class, mechanism: str, **overrides):
    """A tiny config of ``model_class``'s family with ``mechanism``."""
    return (vision_config if is_vision(model_class) else text_config)(mechanism, **overrides)


def build(model_class, mechanism: str, seed: int = 0, **overrides):
    """``model_class`` with ``mechanism``, random weights from ``seed``, in eval mode."""
    torch.manual_seed(seed)
    return model_class(config_for(model_class, mechanism, **overrides)).eval()


def inputs_for(model_class, batch: int = 2) -> dict:
    """Inputs of ``model_class`` (padded texts: ``helpers.models.text_inputs``; a multiple-choice batch holds
    :data:`CHOICES` texts an example, ``[B, CHOICES, N]``; images ``[B, 3, 8, 8]``)."""
    if is_vision(model_class):
        return {"pixel_values": pixel_values(batch)}
    if model_class is hf_effattn.EffAttnRobertaForMultipleChoice:
        return {name: value.view(batch, CHOICES, -1) for name, value in text_inputs(batch * CHOICES, 7).items()}
    return text_inputs(batch, 7)


def outputs_of(model, inputs: dict) -> tuple:
    """The model's output tensors on ``inputs``, without gradients (``to_tuple()``: the ones it returned)."""
    with torch.no_grad():
        return model(**inputs).to_tuple()


def assert_same_outputs(first: tuple, second: tuple, **tolerances) -> None:
    """Two outputs' tuples hold the same tensors (nested tuples, e.g. hidden states, compared element by element)."""
    assert len(first) == len(second)
    for one, other in zip(first, second):
        if isinstance(one, tuple):
            assert_same_outputs(one, other, **tolerances)
        else:
            torch.testing.assert_close(one, other, **tolerances)
