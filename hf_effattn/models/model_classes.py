"""Which of our model classes is which head: the task table, the family table, and the lookups built on them.

A *family* is ``"text"`` (RoBERTa-style, :class:`~hf_effattn.EffAttnRobertaConfig`) or ``"vision"`` (ViT-style,
:class:`~hf_effattn.EffAttnViTConfig`); a *task* names a head (``"base"`` is the bare encoder). Presets
(:mod:`hf_effattn.models.presets`), conversion (:mod:`hf_effattn.conversion.convert`), the model card and the
fine-tuning scripts all read these tables.

    model_class("text", "sequence-classification")     # EffAttnRobertaForSequenceClassification
    family_of("bert")                                   # "text": our text models load BERT checkpoints
    task_of("text", ["RobertaForMaskedLM"])             # "masked-lm"
"""

from __future__ import annotations

from ..modeling.configuration_effattn import EffAttnRobertaConfig, EffAttnViTConfig
from ..modeling.modeling_effattn_roberta import AUTO_CLASSES as TEXT_AUTO_CLASSES
from ..modeling.modeling_effattn_vit import AUTO_CLASSES as VISION_AUTO_CLASSES

# task -> Auto class whose model it builds, per family.
TASKS = {
    "text": {
        "base": "AutoModel",
        "masked-lm": "AutoModelForMaskedLM",
        "sequence-classification": "AutoModelForSequenceClassification",
        "token-classification": "AutoModelForTokenClassification",
        "question-answering": "AutoModelForQuestionAnswering",
        "multiple-choice": "AutoModelForMultipleChoice",
    },
    "vision": {
        "base": "AutoModel",
        "image-classification": "AutoModelForImageClassification",
        "masked-image-modeling": "AutoModelForMaskedImageModeling",
    },
}
# family -> (config class, Auto class name -> model class, the task a preset given num_labels builds).
FAMILIES = {
    "text": (EffAttnRobertaConfig, TEXT_AUTO_CLASSES, "sequence-classification"),
    "vision": (EffAttnViTConfig, VISION_AUTO_CLASSES, "image-classification"),
}
LABELLED_TASKS = ("sequence-classification", "token-classification", "image-classification")  # heads with labels


def model_class(family: str, task: str):
    """Our model class for ``task`` in ``family`` (``"text"`` or ``"vision"``)."""
    if task not in TASKS[family]:
        raise ValueError(f"Unknown task {task!r} for a {family} model: one of {', '.join(TASKS[family])}.")
    return FAMILIES[family][1][TASKS[family][task]]


def all_tasks() -> list[str]:
    """Every task of either family, sorted."""
    return sorted({task for tasks in TASKS.values() for task in tasks})


NO_MODEL_TYPE = ("its config.json names no model_type, or there is no config.json: give the folder that "
                 "holds the checkpoint's config.json (a sentence-transformers model's is its root, or its model/ "
                 "folder where a package ships it), or a Hub id.")


def loadable_model_types() -> dict[str, str]:
    """``model_type -> family`` (``"text"`` or ``"vision"``) for every checkpoint our models load."""
    families = {}
    for family, (_, auto_classes, _) in FAMILIES.items():
        base = auto_classes["AutoModel"]
        for model_type in (base.config_class.model_type, *base.checkpoint_key_mappings):
            families[model_type] = family
    return families


def family_of(model_type: str | None, checkpoint: str = "the checkpoint") -> str:
    """The family whose models load checkpoints of ``model_type`` (``checkpoint``'s, named in the errors)."""
    families = loadable_model_types()
    if model_type is None:
        raise ValueError(f"{checkpoint}: {NO_MODEL_TYPE}")
    if model_type not in families:
        raise ValueError(
            f"Cannot convert a checkpoint of model_type {model_type!r}: one of {', '.join(families)} is needed."
        )
    return families[model_type]


def task_of(family: str, architectures: list[str] | None) -> str:
    """The task whose head the checkpoint was saved with (``"base"`` when it has none of ours)."""
    for task, auto_class in TASKS[family].items():
        suffix = auto_class.removeprefix("AutoModel")
        if suffix and any(name.endswith(suffix) for name in architectures or ()):
            return task
    return "base"
