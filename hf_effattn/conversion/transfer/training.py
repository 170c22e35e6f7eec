"""The training of an attention transfer: which parameters train (the rest frozen), and the loop.

Each layer's student mechanism gets the teacher's input to that layer (teacher forcing: layers train in parallel and
errors do not compound); its loss is the mean-squared error between the two attention-block outputs over real tokens
(:mod:`.losses`), and the step's loss is the sum of the layers'. With ``train="attention"`` (the default) the
mechanisms' new parameters *and* their query/key/value projections train; ``"mechanism"`` trains the new
parameters only, ``"attention_block"`` adds the output projection ``W_o``. The README's attention-transfer
section gives the measurements behind that default. Everything else is frozen, dropout is off, and the model
is handed back with its training mode and ``requires_grad`` flags as they were.
"""

from __future__ import annotations

import itertools
import math
from contextlib import contextmanager
from typing import Iterable, Iterator

import torch
from torch import nn

from ...models.hybrid_parts import (
    MECHANISM_WEIGHT_LEARNING_RATE, WindowDropout, check_mechanism_weights, check_window_dropout, has_hybrid_layers,
    mechanism_weights, only_part, with_mechanism_weight_group,
)
from ...options.user_errors import TrainingDiverged
from .losses import masked_mse, measure, model_inputs, student_outputs
from .peak_memory import peak_memory
from .report import TransferReport, layer_reports
from .teacher import check_pair, encoder_layers, teacher_targets

TRAINABLE = ("mechanism", "attention", "attention_block")
LOWER_LEARNING_RATE = "lower the learning rate (--transfer_learning_rate, --attention_transfer_learning_rate)"
PROJECTIONS = ("query.", "key.", "value.")


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


def endless(data: Iterable[dict]) -> Iterator[dict]:
    """The batches of ``data`` again and again (each pass re-iterates, so a shuffling loader reshuffles)."""
    while True:
        empty = True
        for batch in data:
            empty = False
            yield batch
        if empty:
            raise ValueError("The transfer data yielded no batch.")


def transfer_step(model: nn.Module, teacher: nn.Module, inputs: dict, parameters: list[nn.Parameter],
                  max_grad_norm: float, part: str | None = None, step: int = 1) -> tuple[torch.Tensor, int]:
    """One step's forward and backward (the optimizer's step is the caller's): the teacher's targets, every
    layer's loss, their sum's gradients clipped to ``max_grad_norm``; ``part``: the hybrid layers' part that runs
    alone this step (window dropout), or None; ``step``: its number, from 1, named if the loss is not finite
    (:class:`~hf_effattn.options.user_errors.TrainingDiverged`). Returns the loss and the input length N."""
    layer_inputs, mask, targets, _ = teacher_targets(teacher, inputs)
    with only_part(model, part):
        outputs = student_outputs(model, layer_inputs, mask)
    loss = sum(masked_mse(o, t, mask) for o, t in zip(outputs, targets))
    if not torch.isfinite(loss):
        raise TrainingDiverged(f"The attention-transfer loss became {loss.item()} at step {step}: training diverged; "
                               f"{LOWER_LEARNING_RATE}.")
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
    mechanism_weight_learning_rate: float = MECHANISM_WEIGHT_LEARNING_RATE,
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
            :mod:`hf_effattn.models.hybrid_parts`); the draws depend on the step only.
        mechanism_weight_learning_rate: beside a local window or blocks, the learning rate of the gates (each head's
            weight on the mechanism's part), in a parameter group of their own.
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
    groups = with_mechanism_weight_group([{"params": parameters}], model, mechanism_weight_learning_rate)
    optimizer = torch.optim.AdamW(groups, lr=learning_rate, weight_decay=0.0)
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
                loss, length = transfer_step(model, teacher, inputs, parameters, max_grad_norm, dropout.part(step),
                                             step + 1)
                optimizer.step()
                check_mechanism_weights(model, LOWER_LEARNING_RATE, step + 1)
                scheduler.step()
                optimizer.zero_grad(set_to_none=True)
                losses.append(loss.item())
                examples += len(next(iter(inputs.values())))
                longest = max(longest, length)
                bar.set_postfix(loss=f"{losses[-1]:.4g}")
                bar.update(1)
        after, hidden_after = measure(model, teacher, report_set)
        window_alone, weights = None, None
        if has_hybrid_layers(model):
            with only_part(model, "window"):
                window_alone = [mse for mse, _ in measure(model, teacher, report_set)[0]]
            weights = mechanism_weights(model)
    return TransferReport(
        attention_type=model.config.attention_type, train=train, steps=steps, learning_rate=learning_rate,
        examples_seen=examples, hidden_cosine_before=hidden_before, hidden_cosine_after=hidden_after,
        layers=layer_reports(before, after, weights, window_alone),
        data=data_description, window_dropout=window_dropout, losses=losses, longest_input=longest,
        mechanism_weight_learning_rate=mechanism_weight_learning_rate if weights is not None else None,
        peak_memory_bytes=peak.bytes, peak_memory_method=peak.method,
    )

