"""The teacher of an attention transfer: the source checkpoint with its own softmax attention, loaded, checked
against the student, and run once per batch for what each student layer must reproduce.

Long inputs: the teacher of a model whose positions were extended past its checkpoint's (``max_length=``) is
extended the same way (:func:`load_teacher`), and its softmax attention is computed in chunks of queries
(:func:`softmax_in_query_chunks`), each exact, so that no ``[B, h, N, N]`` (nor ``[h, N, N]``) score tensor is
ever held: a transfer at 4,096 tokens fits in a few GiB.
"""

from __future__ import annotations

import logging
from contextlib import contextmanager

import torch
from torch import nn

from ...modeling import load_report
from ...modeling.attention_vanilla import EagerAttention

logger = logging.getLogger(__name__)

SOFTMAX = ("sdpa", "eager")
TEACHER_CHUNK_SCORES = 2**22  # the most attention scores (B * h * queries * N) the teacher computes at once


def encoder_layers(model: nn.Module) -> nn.ModuleList:
    """The layer stack of one of our models, bare encoder or head."""
    return model.base_model.encoder.layer


def check_softmax(attention_type: str, teacher: str) -> None:
    """Raise unless ``attention_type``, the attention of ``teacher``, is softmax attention."""
    if attention_type not in SOFTMAX:
        raise ValueError(f"{teacher} has {attention_type!r} attention, not softmax, so it cannot teach attention "
                         "transfer: start from the RoBERTa, BERT or ViT checkpoint it was converted from, or load "
                         "the teacher with attention_type='sdpa'.")


def load_teacher(model: nn.Module, source: str, config_dict: dict | None = None, **kwargs) -> nn.Module:
    """The teacher of ``model``: the checkpoint ``source`` it was converted from, as this package's bare encoder
    with the checkpoint's own softmax attention (``sdpa`` for a RoBERTa, BERT or ViT checkpoint). When
    ``model``'s positions were extended past the checkpoint's, the teacher's are extended the same way
    (``max_length=``, unless ``kwargs`` give it). ``config_dict``: the checkpoint's ``config.json`` as a dict, when
    the caller has read it already; it is read here otherwise, and not again by ``from_pretrained``."""
    from transformers import PreTrainedConfig

    config = config_dict if config_dict is not None else PreTrainedConfig.get_config_dict(source)[0]
    check_softmax(config.get("attention_type", "sdpa"), source)
    encoder = type(model.base_model)
    longest = model.config.attention_max_length
    if longest > encoder.config_from_checkpoint(config, None, None, {})[0].attention_max_length:
        kwargs.setdefault("max_length", longest)
    with load_report_held_back():
        teacher = encoder.from_pretrained(source, config_dict=config, **kwargs).eval()
    logger.info(f"The softmax teacher: {source}, read with its own attention ({config.get('attention_type', 'sdpa')}).")
    return teacher


@contextmanager
def load_report_held_back():
    """Inside the block, the load report of our models (new, dropped and extended parameters) is not logged: the
    teacher is the source checkpoint read as it is, and a report of its head's parameters (a pooler that a masked-LM
    checkpoint lacks, a masked-LM head that the encoder drops) would read as a second conversion."""
    report = logging.getLogger(load_report.__name__)
    level = report.level
    report.setLevel(logging.ERROR)
    try:
        yield
    finally:
        report.setLevel(level)


def check_pair(model: nn.Module, teacher: nn.Module) -> None:
    """Raise unless ``teacher`` has softmax attention and the student's layer count and width, on the same device."""
    check_softmax(getattr(teacher.config, "attention_type", None), "The teacher")
    for attribute in ("num_hidden_layers", "hidden_size"):
        mine, theirs = getattr(model.config, attribute), getattr(teacher.config, attribute)
        if mine != theirs:
            raise ValueError(f"The teacher has {attribute}={theirs} but the model {mine}: load the teacher from the "
                             "checkpoint the model was converted from, with attention_type='sdpa'.")
    mine, theirs = next(model.parameters()).device, next(teacher.parameters()).device
    if mine != theirs:
        raise ValueError(f"The teacher is on {theirs} but the model on {mine}: move it with teacher.to({str(mine)!r}).")


@contextmanager
def softmax_in_query_chunks(teacher: nn.Module):
    """Within the block, every layer of ``teacher`` (softmax attention) computes its attention in chunks of queries
    of at most :data:`TEACHER_CHUNK_SCORES` scores (``EagerAttention.max_chunk_scores``, the softmax attention's
    chunked code path): the same outputs to float precision, and never a larger score tensor, whatever kernel
    ``sdpa`` picks. Each layer's setting is restored afterwards."""
    attentions = [layer.attention.self for layer in encoder_layers(teacher)]
    for attention in attentions:
        if not isinstance(attention, EagerAttention):
            raise ValueError(f"The teacher's attention is {type(attention).__name__}, not softmax: load the teacher "
                             "with attention_type='sdpa'.")
    saved = [attention.max_chunk_scores for attention in attentions]
    for attention in attentions:
        attention.max_chunk_scores = TEACHER_CHUNK_SCORES
    try:
        yield
    finally:
        for attention, chunk_scores in zip(attentions, saved):
            attention.max_chunk_scores = chunk_scores


@torch.no_grad()
def teacher_targets(teacher: nn.Module, inputs: dict):
    """Run the teacher once (its attention in query chunks: :func:`softmax_in_query_chunks`); return each
    layer's attention input ``[B, N, C]``, the padding mask ``[B, N]`` its mechanisms got (``None`` without
    padding), each layer's attention-block output ``W_o attention(x)`` and the last hidden state ``[B, N, C]``."""
    layer_inputs, layer_outputs, masks = [], [], []

    def save_input(module, args):
        layer_inputs.append(args[0])
        masks.append(args[1] if len(args) > 1 else None)

    def save_output(module, args, output):
        layer_outputs.append(output)

    handles = []
    for layer in encoder_layers(teacher):
        handles.append(layer.attention.self.register_forward_pre_hook(save_input))
        handles.append(layer.attention.output.dense.register_forward_hook(save_output))
    try:
        with softmax_in_query_chunks(teacher):
            last_hidden_state = teacher.base_model(**inputs).last_hidden_state
    finally:
        for handle in handles:
            handle.remove()
    return layer_inputs, masks[0], layer_outputs, last_hidden_state
