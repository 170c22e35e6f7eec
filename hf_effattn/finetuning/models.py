"""The model to fine-tune and its tokenizer or image processor, through the package surface.

``--model_name_or_path`` names a RoBERTa/BERT/ViT checkpoint (its attention is swapped for
``--attention_type``), one of hf_effattn's own, or a preset (``hf_effattn.list_models()``, e.g.
``vit-tiny-patch4-32/kerformer``): a randomly initialised model to train from scratch, as timm's train script
takes ``--model``. A preset has no tokenizer or image processor, so they are explicit: ``--tokenizer_name``
(required for a text preset), ``--image_processor_name`` (optional for a vision preset; default a
``ViTImageProcessor`` resizing to the preset's image size). The classification head is sized for the task's labels.

The config a model will have is read first, before the data and the model load (:func:`classifier_config`,
:func:`config_of_checkpoint`), so that what the options and that config rule out is refused at once.
"""

from __future__ import annotations

import argparse
import logging

from ..modeling.modeling_effattn_roberta import EffAttnRobertaForSequenceClassification
from ..modeling.modeling_effattn_vit import EffAttnViTForImageClassification
from ..models.presets import create_config, create_model, list_models, resolve
from ..options.window_options import local_part_options
from .arguments import check_against_model
from .data import LabelInfo

ENCODERS = {  # family -> the checkpoints its scripts take
    "text": "a text encoder: a RoBERTa or BERT checkpoint, or one of hf_effattn's text models",
    "vision": "a vision encoder: a ViT checkpoint, or one of hf_effattn's vision models",
}
CLASSIFIERS = {  # family -> its classifier and what it does
    "text": (EffAttnRobertaForSequenceClassification, "text classification"),
    "vision": (EffAttnViTForImageClassification, "image classification"),
}

logger = logging.getLogger(__name__)


def is_preset(name_or_path: str) -> bool:
    """Whether ``--model_name_or_path`` is a preset name such as ``"vit-tiny-patch4-32/kerformer"``."""
    return name_or_path in list_models()


def label_config(labels: LabelInfo) -> dict:
    """The config values that describe the task's labels to a classification head."""
    if labels.is_regression:
        return {"num_labels": 1, "problem_type": "regression"}
    return {
        "num_labels": labels.num_labels,
        "id2label": dict(enumerate(labels.names)),
        "label2id": {name: i for i, name in enumerate(labels.names)},
        "problem_type": "single_label_classification",
    }


def checkpoint_source(args: argparse.Namespace, family: str, purpose: str) -> dict:
    """The ``config.json`` of ``--model_name_or_path``, read before anything loads; a checkpoint of another family, or
    of a type this package does not load, is refused, naming ``purpose`` (what the script does), and so is attention
    transfer from a checkpoint whose attention is not softmax."""
    from transformers import PreTrainedConfig

    from ..models.model_classes import loadable_model_types
    from ..conversion.transfer import check_softmax

    source = PreTrainedConfig.get_config_dict(args.model_name_or_path)[0]
    model_type = source.get("model_type")
    found = loadable_model_types().get(model_type)
    if found != family:
        kind = f"a {found} checkpoint" if found else "not a checkpoint this package loads"
        raise ValueError(f"{args.model_name_or_path} is {kind} (model_type {model_type!r}): {purpose} takes "
                         f"{ENCODERS[family]}.")
    if getattr(args, "attention_transfer_steps", 0):
        check_softmax(source.get("attention_type", "sdpa"), args.model_name_or_path)
    return source


def config_of_checkpoint(args: argparse.Namespace, family: str, model_class, purpose: str, source: dict | None = None,
                         **size):
    """The config that ``model_class`` loads ``--model_name_or_path`` with (``--attention_type``,
    ``--attention_config``, extended to ``size``, e.g. ``max_length=N``), from its ``config.json`` (``source``, read
    and checked by :func:`checkpoint_source` unless given): every check of ``from_pretrained`` runs (``plan_load``),
    before anything loads."""
    source = source if source is not None else checkpoint_source(args, family, purpose)
    return model_class.plan_load(args.model_name_or_path, args.attention_type, args.attention_config,
                                 args.convert_attention, config_dict=source, **size, **local_part_options(args)).target


def classifier_config(args: argparse.Namespace, family: str):
    """The config of the classifier of ``args`` (labels aside), before anything loads: the preset's (its refusals
    checked, :func:`check_preset`) or the checkpoint's."""
    if not is_preset(args.model_name_or_path):
        return config_of_checkpoint(args, family, *CLASSIFIERS[family])
    check_preset(args, family)
    return create_config(args.model_name_or_path, attention_config=args.attention_config, **local_part_options(args))


def check_classifier_options(family: str):
    """The options check of a classification script of ``family``: what its model's config refuses
    (:func:`classifier_config`), and ``--max_length`` against the model's positions."""
    return lambda args: check_against_model(args, classifier_config(args, family))


def check_preset(args: argparse.Namespace, family: str) -> None:
    """Refuse a preset of another ``family``, another ``--attention_type`` than the preset's, and attention
    transfer (a preset has no softmax checkpoint to learn from)."""
    architecture, attention_type = resolve(args.model_name_or_path)
    if architecture.family != family:
        raise ValueError(f"--model_name_or_path {args.model_name_or_path!r} is a {architecture.family} preset: use it "
                         f"with the {architecture.family} script, or choose one of {family} presets (hf-effattn list).")
    if args.attention_type not in (None, attention_type):
        raise ValueError(f"--attention_type {args.attention_type!r} contradicts the preset "
                         f"{args.model_name_or_path!r}: name the mechanism in the preset instead, e.g. "
                         f"'{args.model_name_or_path.split('/')[0]}/{args.attention_type}'.")
    if getattr(args, "attention_transfer_steps", 0):
        raise ValueError("--attention_transfer_steps needs a pretrained softmax checkpoint to learn from; a preset is "
                         "randomly initialised: drop the option, or start from a checkpoint.")


def create_preset_classifier(family: str, args: argparse.Namespace, labels: LabelInfo):
    """A randomly initialised classifier of preset ``args.model_name_or_path`` (of ``family``, checked by
    :func:`check_preset`), with the task's labels and ``--attention_config`` merged into the preset's settings."""
    task = "sequence-classification" if family == "text" else "image-classification"
    logger.info("Training %s from scratch (random weights).", args.model_name_or_path)
    return create_model(args.model_name_or_path, task=task, attention_config=args.attention_config,
                        **local_part_options(args), **label_config(labels))


def load_classifier(model_class, args: argparse.Namespace, labels: LabelInfo):
    """``model_class.from_pretrained`` with the requested attention and the task's label set."""
    return model_class.from_pretrained(
        args.model_name_or_path,
        attention_type=args.attention_type,
        attention_config=args.attention_config,
        convert_attention=args.convert_attention,
        ignore_mismatched_sizes=args.ignore_mismatched_sizes,
        **local_part_options(args),
        **label_config(labels),
    )


def load_text_classifier(args: argparse.Namespace, labels: LabelInfo):
    """A RoBERTa-style sequence classifier with the requested attention (a fresh one for a preset)."""
    if is_preset(args.model_name_or_path):
        return create_preset_classifier("text", args, labels)
    return load_classifier(EffAttnRobertaForSequenceClassification, args, labels)


def load_image_classifier(args: argparse.Namespace, labels: LabelInfo):
    """A ViT-style image classifier with the requested attention (a fresh one for a preset)."""
    if is_preset(args.model_name_or_path):
        return create_preset_classifier("vision", args, labels)
    return load_classifier(EffAttnViTForImageClassification, args, labels)


def load_tokenizer(name_or_path: str, processor_name: str | None = None):
    """The tokenizer of ``processor_name`` (``--tokenizer_name``), else the checkpoint's; a preset needs the former."""
    from transformers import AutoTokenizer

    if processor_name is None and is_preset(name_or_path):
        raise ValueError(f"{name_or_path!r} is a preset (random weights, no tokenizer): pass --tokenizer_name, e.g. "
                         "FacebookAI/roberta-base (its vocabulary must fit the preset's vocab_size).")
    return AutoTokenizer.from_pretrained(processor_name or name_or_path)


def load_image_processor(name_or_path: str, processor_name: str | None = None):
    """The image processor of ``processor_name`` (``--image_processor_name``) or of the checkpoint, or else a
    ``ViTImageProcessor`` resizing to the model's image size (always so for a preset without a processor name)."""
    from transformers import AutoConfig, AutoImageProcessor, ViTImageProcessor

    if processor_name is not None:
        return AutoImageProcessor.from_pretrained(processor_name)
    if is_preset(name_or_path):
        image_size = resolve(name_or_path)[0].config["image_size"]
    else:
        try:
            return AutoImageProcessor.from_pretrained(name_or_path)
        except OSError:
            image_size = AutoConfig.from_pretrained(name_or_path).image_size
    logger.info("Image processor: ViTImageProcessor resizing to %dx%d, scaled to [-1, 1] (pass --image_processor_name "
                "for another).", image_size, image_size)
    return ViTImageProcessor(size={"height": image_size, "width": image_size})
