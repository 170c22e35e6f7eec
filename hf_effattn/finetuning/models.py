"""The model to fine-tune and its tokenizer or image processor, through the package surface.

``--model_name_or_path`` names a RoBERTa/BERT/ViT checkpoint (its attention is swapped for
``--attention_type``) or one of hf_effattn's own; the classification head is sized for the task's labels.
"""

from __future__ import annotations

import argparse

from .. import EffAttnRobertaForSequenceClassification, EffAttnViTForImageClassification
from .data import LabelInfo


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


def load_classifier(model_class, args: argparse.Namespace, labels: LabelInfo):
    """``model_class.from_pretrained`` with the requested attention and the task's label set."""
    return model_class.from_pretrained(
        args.model_name_or_path,
        attention_type=args.attention_type,
        attention_config=args.attention_config,
        convert_attention=args.convert_attention,
        ignore_mismatched_sizes=args.ignore_mismatched_sizes,
        **label_config(labels),
    )


def load_text_classifier(args: argparse.Namespace, labels: LabelInfo):
    """A RoBERTa-style sequence classifier with the requested attention."""
    return load_classifier(EffAttnRobertaForSequenceClassification, args, labels)


def load_image_classifier(args: argparse.Namespace, labels: LabelInfo):
    """A ViT-style image classifier with the requested attention."""
    return load_classifier(EffAttnViTForImageClassification, args, labels)


def load_tokenizer(name_or_path: str):
    """The checkpoint's tokenizer."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(name_or_path)


def load_image_processor(name_or_path: str):
    """The checkpoint's image processor, or a ViT processor sized from its config when it has none."""
    from transformers import AutoConfig, AutoImageProcessor, ViTImageProcessor

    try:
        return AutoImageProcessor.from_pretrained(name_or_path)
    except OSError:
        image_size = AutoConfig.from_pretrained(name_or_path).image_size
        return ViTImageProcessor(size={"height": image_size, "width": image_size})
