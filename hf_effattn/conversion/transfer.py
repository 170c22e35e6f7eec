"""Attention transfer: train a converted model's new attention to reproduce its source's softmax attention.

A pretrained RoBERTa, BERT or ViT whose self-attention is swapped for an efficient mechanism keeps every other
weight, but its attention starts from scratch (or from query/key/value projections made for softmax), and its
hidden states drift far from the original's. Attention transfer (as LoLCATs and Hedgehog do for decoders) closes
that gap before fine-tuning, with no labels, layer by layer:

* the *teacher* is the source checkpoint with its own softmax attention (``sdpa``), same weights;
* each layer's *student* mechanism gets the teacher's input to that layer (teacher forcing: layers train in
  parallel and errors do not compound), the teacher's padding mask, and the state the previous student layer
  hands on (DBA's Z, Singularformer's residual scores), exactly as in the model;
* its loss is the mean-squared error between the two attention-block outputs after the output projection,
  ``W_o attention(x)`` ``[B, N, C]``, over real tokens only: pads never enter the loss.

The loss of the whole step is the sum of the layers' losses. With ``train="attention"`` (the default) the
mechanisms' new parameters *and* their query/key/value projections train; ``"mechanism"`` trains the new
parameters only, ``"attention_block"`` adds the output projection ``W_o``. The README's attention-transfer
section gives the measurements behind that default. Everything else is frozen, dropout is off, and the model
is handed back with its training mode and ``requires_grad`` flags as they were.

    teacher = EffAttnRobertaModel.from_pretrained(source, attention_type="sdpa")
    model = EffAttnRobertaForSequenceClassification.from_pretrained(source, attention_type="kerformer")
    report = transfer_attention(model, teacher, loader, steps=1000)   # loader yields tokenizer batches
    print(report.format())

``hf-effattn convert SRC --attention_type X --transfer_data FILE --transfer_steps N`` does the same from the
shell (see :mod:`hf_effattn.conversion.transfer_data` for the data), and the fine-tuning scripts do it with
``--attention_transfer_steps N`` on the task's own training inputs.

Long inputs: the teacher of a model whose positions were extended past its checkpoint's (``max_length=``) is
extended the same way (:func:`load_teacher`), and its softmax attention is computed in chunks of queries
(:func:`softmax_in_query_chunks`), each exact, so that no ``[B, h, N, N]`` (nor ``[h, N, N]``) score tensor is
ever held: a transfer at 4,096 tokens fits in a few GiB. The report gives the longest input and the peak memory
(:mod:`hf_effattn.conversion.peak_memory`).
"""

from __future__ import annotations

import itertools
import json
import math
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

import torch
import torch.nn.functional as F
from torch import nn

from ..hybrid_parts import (
    WindowDropout, check_mechanism_weights, check_window_dropout, has_hybrid_layers, mechanism_weights, only_part,
)
from ..modeling.attention_base import AttentionOutput
from ..modeling.attention_vanilla import EagerAttention
from .peak_memory import peak_memory

TRAINABLE = ("mechanism", "attention", "attention_block")
MODEL_INPUTS = ("input_ids", "attention_mask", "token_type_ids", "position_ids", "inputs_embeds", "pixel_values")
PROJECTIONS = ("query.", "key.", "value.")
SOFTMAX = ("sdpa", "eager")
REPORT_FILE = "attention_transfer.json"
TEACHER_CHUNK_SCORES = 2**22  # the most attention scores (B * h * queries * N) the teacher computes at once
MODEL_LENGTH = "model"  # a transfer max_length meaning: the model's own maximum length
DEFAULT_LENGTH = 128  # the transfer max_length by default (the model's maximum length if that is shorter)
REPORT_NUMBERS = ("steps", "learning_rate", "examples_seen", "hidden_cosine_before", "hidden_cosine_after",
                  "window_dropout")


@dataclass
class LayerTransfer:
    """One layer's attention-block error before and after the transfer: the MSE the transfer minimises and
    the mean cosine similarity of student and teacher outputs, over the real tokens of the report batches; with a
    local window beside the mechanism, the learned weight of the mechanism's part per head (``sigma(mechanism_logit)``)
    and the MSE after with the mechanism's part switched off (what the mechanism adds to the window)."""

    layer: int
    mse_before: float
    mse_after: float
    cosine_before: float
    cosine_after: float
    mechanism_weight: list[float] | None = None
    mse_after_window_alone: float | None = None


@dataclass
class TransferReport:
    """What a transfer did and reached. ``hidden_cosine_*`` compares the whole model's last hidden state with
    the teacher's, token by token (real tokens), without teacher forcing. ``longest_input`` is the most tokens
    (or patches) of a training batch, ``peak_memory_bytes`` the transfer's peak memory as
    ``peak_memory_method`` measured it (both ``None`` in reports written before they existed)."""

    attention_type: str
    train: str
    steps: int
    learning_rate: float
    examples_seen: int
    hidden_cosine_before: float
    hidden_cosine_after: float
    layers: list[LayerTransfer]
    data: str | None = None
    window_dropout: float = 0.0
    losses: list[float] = field(default_factory=list)
    longest_input: int | None = None
    peak_memory_bytes: int | None = None
    peak_memory_method: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> "TransferReport":
        return cls(**{**values, "layers": [LayerTransfer(**layer) for layer in values["layers"]]})

    def save(self, folder) -> Path:
        """Write the report to ``folder/attention_transfer.json`` and return its path."""
        path = Path(folder) / REPORT_FILE
        path.write_text(json.dumps(self.to_dict(), indent=2))
        return path

    @classmethod
    def read(cls, folder) -> "TransferReport":
        """The report saved in ``folder``; ``ValueError`` naming the file when it is unreadable or no such report."""
        path = Path(folder) / REPORT_FILE
        try:
            report = cls.from_dict(json.loads(path.read_text()))
        except (OSError, ValueError, TypeError, KeyError, AttributeError) as error:
            raise ValueError(f"{path} is not an attention-transfer report ({type(error).__name__}: {error}): remove "
                             "it, or write the folder anew.") from None
        numbers = [getattr(report, name) for name in REPORT_NUMBERS]
        for layer in report.layers:  # beside a local window, also its weights and the error of the window alone
            optional = [layer.mse_after_window_alone] if layer.mse_after_window_alone is not None else []
            numbers += [layer.layer, layer.mse_before, layer.mse_after, layer.cosine_before, layer.cosine_after,
                        *optional, *(layer.mechanism_weight or [])]
        if not all(isinstance(value, (int, float)) and not isinstance(value, bool) for value in numbers):
            raise ValueError(f"{path} is not an attention-transfer report (a number is missing or not a number): "
                             "remove it, or write the folder anew.")
        return report

    def format(self) -> str:
        """A plain-text table: per layer, MSE and cosine before -> after, then the last hidden state's cosine."""
        lines = [f"Attention transfer to {self.attention_type!r}: {self.steps} steps, {self.examples_seen} examples, "
                 f"training {self.train!r} at lr {self.learning_rate:g}",
                 f"{'layer':>5}  {'MSE before':>10}  {'MSE after':>10}  {'cosine before':>13}  {'cosine after':>12}"]
        lines += [f"{r.layer:>5}  {r.mse_before:>10.4g}  {r.mse_after:>10.4g}  {r.cosine_before:>13.4f}  "
                  f"{r.cosine_after:>12.4f}" for r in self.layers]
        if any(r.mechanism_weight for r in self.layers):
            lines.append(f"beside the local window (window dropout {self.window_dropout:g}): per layer, the MSE after "
                         "with the mechanism's part switched off, and its weight per head")
            lines += [f"{r.layer:>5}  {r.mse_after_window_alone:>10.4g}  "
                      + " ".join(f"{w:.3f}" for w in r.mechanism_weight) for r in self.layers]
        lines.append(f"last hidden state, token cosine to the teacher: {self.hidden_cosine_before:.4f} -> "
                     f"{self.hidden_cosine_after:.4f}")
        if self.longest_input is not None:
            lines.append(f"longest input: {self.longest_input} tokens")
        if self.peak_memory_bytes is not None:
            lines.append(f"peak memory: {self.peak_memory_bytes / 2**30:.2f} GiB ({self.peak_memory_method})")
        return "\n".join(lines)


def encoder_layers(model: nn.Module) -> nn.ModuleList:
    """The layer stack of one of our models, bare encoder or head."""
    return model.base_model.encoder.layer


def model_inputs(batch: dict, device) -> dict:
    """The entries of a data-loader batch that the base model takes (labels and the like dropped), on ``device``."""
    return {key: value.to(device) for key, value in batch.items() if key in MODEL_INPUTS}


def query_chunked_forward(attention: EagerAttention):
    """A forward for the softmax ``attention`` (eval mode) that computes ``softmax(Q K^T / sqrt(d)) V`` for
    chunks of queries, each of at most :data:`TEACHER_CHUNK_SCORES` scores ``[B, h, rows, N]``. Each query's
    softmax is over all the keys, so every chunk is exact."""

    def forward(hidden_states, padding_mask=None, state=None, output_attentions=False) -> AttentionOutput:
        query, key, value = attention.project(hidden_states)
        batch, heads, length, _ = query.shape
        rows = max(1, TEACHER_CHUNK_SCORES // (batch * heads * length))
        mask = None if padding_mask is None else padding_mask[:, None, None, :]
        chunks = [F.scaled_dot_product_attention(queries, key, value, attn_mask=mask, scale=attention.head_dim**-0.5)
                  for queries in query.split(rows, dim=2)]
        return AttentionOutput(attention.merge_heads(torch.cat(chunks, dim=2)))

    return forward


@contextmanager
def softmax_in_query_chunks(teacher: nn.Module):
    """Within the block, every layer of ``teacher`` (softmax attention, eval mode) computes its attention in
    chunks of queries (:func:`query_chunked_forward`): the same outputs to float precision, and never a score
    tensor of more than :data:`TEACHER_CHUNK_SCORES` elements, whatever kernel ``sdpa`` picks."""
    attentions = [layer.attention.self for layer in encoder_layers(teacher)]
    for attention in attentions:
        if not isinstance(attention, EagerAttention):
            raise ValueError(f"The teacher's attention is {type(attention).__name__}, not softmax: load the teacher "
                             "with attention_type='sdpa'.")
        attention.forward = query_chunked_forward(attention)
    try:
        yield
    finally:
        for attention in attentions:
            del attention.forward


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


def student_outputs(model: nn.Module, layer_inputs: list[torch.Tensor], padding_mask) -> list[torch.Tensor]:
    """Each layer's attention-block output ``[B, N, C]`` when its mechanism gets the teacher's input to that layer
    and the state of the student layer before it."""
    outputs, state = [], None
    for layer, hidden_states in zip(encoder_layers(model), layer_inputs):
        attention = layer.attention.self(hidden_states, padding_mask, state, False)
        outputs.append(layer.attention.output.dense(attention.context))
        state = attention.state
    return outputs


def real_token_weights(padding_mask: torch.Tensor | None, like: torch.Tensor) -> torch.Tensor:
    """``[B, N, 1]`` weights that average over real tokens: 1 / (number of real tokens) at each, 0 at pads."""
    if padding_mask is None:
        return torch.full((*like.shape[:2], 1), 1.0 / (like.shape[0] * like.shape[1]), device=like.device)
    weights = padding_mask.to(like.dtype).unsqueeze(-1)
    return weights / weights.sum().clamp_min(1.0)


def masked_mse(prediction: torch.Tensor, target: torch.Tensor, padding_mask) -> torch.Tensor:
    """Mean over real tokens and channels of ``(prediction - target)^2``; pads contribute nothing."""
    squared = (prediction - target).pow(2).mean(-1, keepdim=True)
    return (squared * real_token_weights(padding_mask, prediction)).sum()


def masked_cosine(prediction: torch.Tensor, target: torch.Tensor, padding_mask) -> torch.Tensor:
    """Mean over real tokens of the cosine similarity of ``prediction`` and ``target`` ``[B, N, C]``."""
    cosine = nn.functional.cosine_similarity(prediction.float(), target.float(), dim=-1).unsqueeze(-1)
    return (cosine * real_token_weights(padding_mask, cosine)).sum()


def trainable_parameters(model: nn.Module, train: str) -> list[nn.Parameter]:
    """The parameters a transfer trains (see the module docstring for ``train``)."""
    if train not in TRAINABLE:
        raise ValueError(f"train={train!r} is not one of {', '.join(TRAINABLE)}.")
    parameters = []
    for layer in encoder_layers(model):
        for name, parameter in layer.attention.self.named_parameters():
            if train != "mechanism" or not name.startswith(PROJECTIONS):
                parameters.append(parameter)
        if train == "attention_block":
            parameters += list(layer.attention.output.dense.parameters())
    if not parameters:
        raise ValueError(f"The {model.config.attention_type!r} attention has no parameters of its own to transfer "
                         "into: use train='attention' (its query/key/value projections too).")
    return parameters


@contextmanager
def training_only(model: nn.Module, parameters: list[nn.Parameter]):
    """Within the block: ``model`` in eval mode (dropout off), only ``parameters`` require gradients. Restores
    the mode and every flag afterwards."""
    flags = {parameter: parameter.requires_grad for parameter in model.parameters()}
    was_training = model.training
    chosen = set(parameters)
    for parameter in model.parameters():
        parameter.requires_grad_(parameter in chosen)
    model.eval()
    try:
        yield
    finally:
        for parameter, flag in flags.items():
            parameter.requires_grad_(flag)
        model.train(was_training)


def load_teacher(model: nn.Module, source: str, **kwargs) -> nn.Module:
    """The teacher of ``model``: the checkpoint ``source`` it was converted from, as this package's bare encoder
    with the checkpoint's own softmax attention (``sdpa`` for a RoBERTa, BERT or ViT checkpoint). When
    ``model``'s positions were extended past the checkpoint's, the teacher's are extended the same way
    (``max_length=``, unless ``kwargs`` give it)."""
    from transformers import PreTrainedConfig

    config = PreTrainedConfig.get_config_dict(source)[0]
    check_softmax(config.get("attention_type", "sdpa"), source)
    encoder = type(model.base_model)
    longest = model.config.attention_max_length
    if longest > encoder.config_from_checkpoint(config, None, None, {})[0].attention_max_length:
        kwargs.setdefault("max_length", longest)
    return encoder.from_pretrained(source, **kwargs).eval()


def transfer_length(max_length: int | str | None, longest: int) -> int:
    """The length texts are truncated to for a transfer into a model of maximum length ``longest``: ``max_length``,
    or ``longest`` for ``"model"``, or by default (``None``) :data:`DEFAULT_LENGTH` or ``longest`` if shorter.
    Raise when ``max_length`` is longer than ``longest``."""
    if max_length is None:
        return min(DEFAULT_LENGTH, longest)
    if max_length == MODEL_LENGTH:
        return longest
    if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 1:
        raise ValueError(f"The transfer max_length {max_length!r} is neither a positive number of tokens nor "
                         f"{MODEL_LENGTH!r} (the model's maximum length).")
    if max_length > longest:
        raise ValueError(
            f"The transfer max_length {max_length} (--transfer_max_length) is longer than the model's maximum "
            f"length {longest} (config.attention_max_length): use at most {longest}, or {MODEL_LENGTH!r} for the "
            f"model's own, or extend the model's positions first (convert with --max_length {max_length})."
        )
    return max_length


def check_softmax(attention_type: str, teacher: str) -> None:
    """Raise unless ``attention_type``, the attention of ``teacher``, is softmax attention."""
    if attention_type not in SOFTMAX:
        raise ValueError(f"{teacher} has {attention_type!r} attention, not softmax, so it cannot teach attention "
                         "transfer: start from the RoBERTa, BERT or ViT checkpoint it was converted from, or load "
                         "the teacher with attention_type='sdpa'.")


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


def endless(data: Iterable[dict]) -> Iterator[dict]:
    """The batches of ``data`` again and again (each pass re-iterates, so a shuffling loader reshuffles)."""
    while True:
        empty = True
        for batch in data:
            empty = False
            yield batch
        if empty:
            raise ValueError("The transfer data yielded no batch.")


@torch.no_grad()
def measure(model: nn.Module, teacher: nn.Module, batches: list[dict]) -> tuple[list[tuple[float, float]], float]:
    """Per layer ``(MSE, cosine)`` under teacher forcing, and the last hidden state's token cosine, averaged
    over ``batches`` (in eval mode; the hybrid layers' parts as :func:`~hf_effattn.hybrid_parts.only_part` sets
    them)."""
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    per_layer, hidden = [], []
    for batch in batches:
        inputs = model_inputs(batch, device)
        layer_inputs, mask, targets, teacher_hidden = teacher_targets(teacher, inputs)
        outputs = student_outputs(model, layer_inputs, mask)
        per_layer.append([(masked_mse(o, t, mask).item(), masked_cosine(o, t, mask).item())
                          for o, t in zip(outputs, targets)])
        hidden.append(masked_cosine(model.base_model(**inputs).last_hidden_state, teacher_hidden, mask).item())
    model.train(was_training)
    layers = [tuple(sum(values) / len(batches) for values in zip(*layer)) for layer in zip(*per_layer)]
    return layers, sum(hidden) / len(hidden)


def transfer_step(model: nn.Module, teacher: nn.Module, inputs: dict, parameters: list[nn.Parameter],
                  max_grad_norm: float, part: str | None = None) -> tuple[torch.Tensor, int]:
    """One step's forward and backward (the optimizer's step is the caller's): the teacher's targets, every
    layer's loss, their sum's gradients clipped to ``max_grad_norm``; ``part``: the hybrid layers' part that runs
    alone this step (window dropout), or None. Returns the loss and the input length N."""
    layer_inputs, mask, targets, _ = teacher_targets(teacher, inputs)
    with only_part(model, part):
        outputs = student_outputs(model, layer_inputs, mask)
    loss = sum(masked_mse(o, t, mask) for o, t in zip(outputs, targets))
    if not torch.isfinite(loss):
        raise FloatingPointError(f"The attention-transfer loss became {loss.item()}: lower the learning rate "
                                 "(--transfer_learning_rate).")
    loss.backward()
    torch.nn.utils.clip_grad_norm_(parameters, max_grad_norm)
    return loss.detach(), layer_inputs[0].shape[1]


def transfer_attention(
    model: nn.Module,
    teacher: nn.Module,
    data: Iterable[dict],
    *,
    steps: int = 1000,
    learning_rate: float = 3e-3,
    train: str = "attention",
    warmup_ratio: float = 0.05,
    lr_scheduler_type: str = "cosine",
    max_grad_norm: float = 1.0,
    window_dropout: float = 0.0,
    report_data: Iterable[dict] | None = None,
    report_batches: int = 4,
    data_description: str | None = None,
    progress: bool = True,
) -> TransferReport:
    """Train ``model``'s attention to reproduce ``teacher``'s, in place; return the report.

    Args:
        model: one of this package's models (any head) with the efficient mechanism, converted from a checkpoint.
        teacher: the same checkpoint with softmax attention (``attention_type="sdpa"``): same layers and width.
        data: batches of model inputs as a data loader yields them (``input_ids`` and ``attention_mask`` from a
            tokenizer, or ``pixel_values``); other keys (labels) are ignored. Cycled for ``steps`` steps.
        steps: optimizer steps (AdamW, no weight decay, gradient clipping at ``max_grad_norm``).
        lr_scheduler_type: a Transformers schedule (``"cosine"``, ``"linear"``, ``"constant_with_warmup"``, ...),
            after a linear warm-up over ``warmup_ratio`` of the steps.
        train: which parameters train: ``"mechanism"``, ``"attention"`` (default) or ``"attention_block"``.
        window_dropout: with a local window beside the mechanism, the share of steps on which the window is switched
            off, so that the mechanism's part learns to reproduce the teacher alone (see
            :mod:`hf_effattn.hybrid_parts`); the draws depend on the step only.
        report_data: batches to measure before and after on (default: the first ``report_batches`` of ``data``).
        data_description: what the data was, for the report and the model card.
        progress: show a progress bar with the loss.
    """
    from tqdm.auto import tqdm
    from transformers import get_scheduler

    if steps < 1:
        raise ValueError(f"steps={steps}: the transfer needs at least one step.")
    check_pair(model, teacher)
    check_window_dropout(model, window_dropout, "window_dropout (--transfer_window_dropout)")
    dropout = WindowDropout(window_dropout)
    teacher.eval()
    report_set = list(report_data) if report_data is not None else []
    batches = endless(data)
    if not report_set:
        report_set = list(itertools.islice(iter(data), report_batches))
        if not report_set:
            raise ValueError("The transfer data yielded no batch.")
    parameters = trainable_parameters(model, train)
    optimizer = torch.optim.AdamW(parameters, lr=learning_rate, weight_decay=0.0)
    scheduler = get_scheduler(lr_scheduler_type, optimizer, num_warmup_steps=math.ceil(warmup_ratio * steps),
                              num_training_steps=steps)
    device = next(model.parameters()).device
    losses, examples, longest = [], 0, 0
    with peak_memory(device) as peak:
        before, hidden_before = measure(model, teacher, report_set)
        with training_only(model, parameters), tqdm(total=steps, desc="Attention transfer",
                                                    disable=not progress) as bar:
            for step in range(steps):
                inputs = model_inputs(next(batches), device)
                loss, length = transfer_step(model, teacher, inputs, parameters, max_grad_norm, dropout.part(step))
                optimizer.step()
                check_mechanism_weights(model, "lower the learning rate (--transfer_learning_rate)")
                scheduler.step()
                optimizer.zero_grad(set_to_none=True)
                losses.append(loss.item())
                examples += len(next(iter(inputs.values())))
                longest = max(longest, length)
                bar.set_postfix(loss=f"{losses[-1]:.4g}")
                bar.update(1)
        after, hidden_after = measure(model, teacher, report_set)
        window_alone, weights = [None] * len(after), [None] * len(after)
        if has_hybrid_layers(model):
            with only_part(model, "window"):
                window_alone = [mse for mse, _ in measure(model, teacher, report_set)[0]]
            weights = mechanism_weights(model)
    return TransferReport(
        attention_type=model.config.attention_type, train=train, steps=steps, learning_rate=learning_rate,
        examples_seen=examples, hidden_cosine_before=hidden_before, hidden_cosine_after=hidden_after,
        layers=[LayerTransfer(i, b[0], a[0], b[1], a[1], w, alone)
                for i, (b, a, w, alone) in enumerate(zip(before, after, weights, window_alone))],
        data=data_description, window_dropout=window_dropout, losses=losses, longest_input=longest,
        peak_memory_bytes=peak.bytes, peak_memory_method=peak.method,
    )
