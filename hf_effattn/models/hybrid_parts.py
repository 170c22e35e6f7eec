"""The two parts of a hybrid attention layer (a mechanism beside an exact local window or blocks,
``hf_effattn.modeling.hybrid_attention``), switched on and off.

A hybrid layer runs both parts by default. Training code switches the window off for a share of the
steps (*window dropout*), so that the mechanism's part has to reproduce the teacher, or predict the masked tokens,
alone and is not bypassed by the window; evaluation switches the mechanism's part off to measure what it adds::

    with only_part(model, "window"):       # the window alone (and the global tokens): what `local` would give
        loss_without_mechanism = evaluate(model)
    dropout = WindowDropout(0.25, seed=0)
    with only_part(model, "mechanism" if dropout.drops(step) else None):
        loss = model(**batch).loss

:func:`mechanism_weights` reads each layer's learned per-head weight on the mechanism's part,
``sigma(mechanism_logit)``, and :func:`check_mechanism_weights` stops a training run whose weights stopped being
numbers.
"""

from __future__ import annotations

import math
import random
from contextlib import contextmanager

import torch
from torch import nn

from ..modeling.attention_base import EfficientAttention
from ..modeling.hybrid_attention import HybridAttention
from ..modeling.encoder import EffAttnAttention
from ..options.user_errors import TrainingDiverged

PARTS = ("window", "mechanism")


def hybrid_layers(model: nn.Module) -> list[HybridAttention]:
    """The attention modules of ``model`` with a mechanism beside a local part (gated), in layer order."""
    return [module for module in model.modules()
            if isinstance(module, HybridAttention) and module.window.initial_mechanism_weight is not None]


def has_hybrid_layers(model: nn.Module) -> bool:
    return bool(hybrid_layers(model))


@contextmanager
def only_part(model: nn.Module, part: str | None):
    """Within the block, every hybrid layer of ``model`` runs ``part`` alone; ``None`` changes nothing. The mechanism
    alone skips the local part (``layer.parts``); the window alone is the layer with its gate closed (``sigma = 0``:
    the part's output exactly, the mechanism still run, weighted zero; an evaluation's measure). Restores both."""
    if part not in (None, *PARTS):
        raise ValueError(f"part={part!r} is not one of {', '.join(PARTS)} (or None for both).")
    layers = hybrid_layers(model) if part else []
    gates = [layer.window.mechanism_logit.detach().clone() for layer in layers]
    with torch.no_grad():
        for layer in layers:
            if part == "mechanism":
                layer.parts = part
            else:
                layer.window.mechanism_logit.fill_(-math.inf)
    try:
        yield
    finally:
        with torch.no_grad():
            for layer, gate in zip(layers, gates):
                layer.parts = "both"
                layer.window.mechanism_logit.copy_(gate)


class WindowDropout:
    """Whether training step ``step`` runs with the window switched off: with probability ``rate``, drawn from
    ``seed`` and the step alone, so that a resumed run makes the same draws."""

    def __init__(self, rate: float, seed: int = 0):
        if not 0 <= rate < 1:
            raise ValueError(f"window_dropout={rate!r}: it must be a share of the steps in [0, 1).")
        self.rate, self.seed = rate, seed

    def drops(self, step: int) -> bool:
        return self.rate > 0 and random.Random(f"{self.seed}-{step}").random() < self.rate

    def part(self, step: int) -> str | None:
        """``"mechanism"`` on a step that drops the window, else None (both parts)."""
        return "mechanism" if self.drops(step) else None


def check_local_part(model: nn.Module, option: str, value) -> None:
    """Raise when ``option``, set to ``value``, acts on a local part beside the mechanism (its window dropout, its
    gates' learning rate) and ``model`` has no hybrid layer."""
    if not has_hybrid_layers(model):
        name = next(module.name for module in model.modules() if isinstance(module, EfficientAttention))
        raise ValueError(f"{option}={value} acts on a local window or blocks beside the mechanism, and this "
                         f"{name!r} model has none: set local_window (e.g. --local_window 128) or local_block, or "
                         "drop the option.")


def first_attention(config) -> nn.Module:
    """The first layer's attention of a model of ``config``, before the model exists, built on the meta device
    (nothing allocated): it has a local part when any layer has, for the checks of the options acting on one."""
    with torch.device("meta"):
        return EffAttnAttention(config, layer_idx=0, post_norm=True)


def check_window_dropout(model: nn.Module, rate: float, option: str = "window_dropout") -> None:
    """Raise unless ``rate`` is a share in [0, 1), and, when above 0, ``model`` has a hybrid layer to act on."""
    WindowDropout(rate)
    if rate > 0:
        check_local_part(model, option, rate)


def check_window_dropout_of(config, rate: float, option: str = "window_dropout") -> None:
    """:func:`check_window_dropout` for a model of ``config`` before it exists (:func:`first_attention`)."""
    if rate:
        check_window_dropout(first_attention(config), rate, option)


def mechanism_weights(model: nn.Module) -> list[list[float] | None]:
    """Per attention layer of ``model``, in order, its per-head weight on the mechanism's part,
    ``sigma(mechanism_logit)``, or None for a layer without a window (``local_window_every``); ``[]`` when no layer
    has a mechanism beside a window."""
    if not has_hybrid_layers(model):
        return []
    return [module.window.mechanism_weight().detach().float().cpu().tolist()
            if isinstance(module, HybridAttention) else None
            for module in model.modules() if isinstance(module, EfficientAttention)]


# The mechanism weights' (the gates') own learning rate, in attention transfer, masked-LM pretraining and fine-tuning:
# at the weights' learning rate a gate stays where it starts (docs/long-inputs.md has the measurements).
MECHANISM_WEIGHT_LEARNING_RATE = 1e-2
# Adam's epsilon for the gates: a gate near zero has gradients of the gate's own order (1e-11 for a gate of 1e-4 is
# usual), which Adam's default 1e-8 would swamp, leaving it where it starts.
MECHANISM_WEIGHT_EPS = 1e-16


def with_mechanism_weight_group(groups: list[dict], model: nn.Module, learning_rate: float | None) -> list[dict]:
    """Adam(W) parameter ``groups`` with the hybrid layers' gates (``window.mechanism_logit``) moved into a group of
    their own, at ``learning_rate`` (None: the optimizer's), without weight decay and with Adam's epsilon at
    :data:`MECHANISM_WEIGHT_EPS`; ``groups`` unchanged when ``model`` has no hybrid layer. A logit moves the gate
    multiplicatively where it is small, so that Adam's steps of about ``learning_rate`` in the logit take it away
    from a start near zero within a few hundred steps."""
    gates = {id(layer.window.mechanism_logit) for layer in hybrid_layers(model)}
    if not gates:
        return groups
    kept = [{**group, "params": [p for p in group["params"] if id(p) not in gates]} for group in groups]
    own = [p for group in groups for p in group["params"] if id(p) in gates]
    gate_group = {"params": own, "weight_decay": 0.0, "eps": MECHANISM_WEIGHT_EPS} | (
        {} if learning_rate is None else {"lr": learning_rate})
    return [group for group in kept if group["params"]] + [gate_group]


def check_mechanism_weights(model: nn.Module, fix: str = "lower the learning rate", step: int | None = None) -> None:
    """Raise :class:`~hf_effattn.options.user_errors.TrainingDiverged` naming the first layer whose mechanism weight is
    NaN or infinite, and the training ``step`` when given (one host-device sync for all layers)."""
    layers = hybrid_layers(model)
    if not layers or bool(torch.isfinite(torch.cat([layer.window.mechanism_logit for layer in layers])).all()):
        return
    layer = next(layer for layer in layers if not bool(torch.isfinite(layer.window.mechanism_logit).all()))
    at_step = "" if step is None else f" at step {step}"
    raise TrainingDiverged(f"The mechanism weight of layer {layer.layer_idx} (window.mechanism_logit) became "
                           f"{layer.window.mechanism_logit.detach().tolist()}{at_step}: training diverged; {fix}.")
