"""Shared builders for the model-layer tests: tiny configs, inputs, and tiny checkpoints saved with the real
Transformers classes (nothing is downloaded)."""

from __future__ import annotations

import torch
from transformers import BertConfig, RobertaConfig, ViTConfig

import hf_effattn

MECHANISMS = ["singularformer", "kerformer", "dba", "psf", "eager", "sdpa"]
PAD = 1  # RoBERTa's pad_token_id

SIZES = dict(hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32)
NO_DROPOUT = dict(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
TEXT = dict(SIZES, vocab_size=40, max_position_embeddings=20, type_vocab_size=2)  # up to 18 tokens (RoBERTa)
VISION = dict(SIZES, image_size=8, patch_size=4, encoder_stride=4, num_channels=3)  # 4 patches + [CLS]


def text_config(attention_type: str = "sdpa", **overrides) -> hf_effattn.EffAttnRobertaConfig:
    return hf_effattn.EffAttnRobertaConfig(attention_type=attention_type, **{**TEXT, **NO_DROPOUT, **overrides})


def vision_config(attention_type: str = "sdpa", **overrides) -> hf_effattn.EffAttnViTConfig:
    return hf_effattn.EffAttnViTConfig(attention_type=attention_type, **{**VISION, **NO_DROPOUT, **overrides})


def text_inputs(batch: int = 3, length: int = 9, seed: int = 0, pad_token_id: int = PAD) -> dict:
    """Random ids with the second sequence right-padded and the third left-padded."""
    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(3, TEXT["vocab_size"], (batch, length), generator=generator)
    attention_mask = torch.ones(batch, length, dtype=torch.long)
    if batch > 1:
        attention_mask[1, length - 3 :] = 0
    if batch > 2:
        attention_mask[2, :2] = 0
    input_ids = input_ids.masked_fill(attention_mask == 0, pad_token_id)
    return {"input_ids": input_ids, "attention_mask": attention_mask}


def pixel_values(batch: int = 2, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(batch, VISION["num_channels"], VISION["image_size"], VISION["image_size"], generator=generator)


def source_config(kind: str, **overrides):
    """A tiny Transformers config of a source architecture: ``"roberta"``, ``"bert"`` or ``"vit"``."""
    if kind == "vit":
        return ViTConfig(**{**VISION, **NO_DROPOUT, **overrides})
    if kind == "bert":
        return BertConfig(**{**TEXT, **NO_DROPOUT, "pad_token_id": 0, **overrides})
    return RobertaConfig(**{**TEXT, **NO_DROPOUT, **overrides})


def save_source(model_class, kind: str, folder, seed: int = 0, **save_kwargs):
    """Build ``model_class`` (a Transformers class) with random weights, save it to ``folder``, return it (eval)."""
    torch.manual_seed(seed)
    model = model_class(source_config(kind, num_labels=2)).eval()
    model.save_pretrained(folder, **save_kwargs)
    return model
