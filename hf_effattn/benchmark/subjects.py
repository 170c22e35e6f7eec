"""What is timed: the module of a mechanism and part (the mechanism alone, one encoder layer, a whole encoder, a
peer's model, or the floor: the layer without token mixing) on fixed random inputs, run as it is or compiled with
``torch.compile`` (a ``<row>@compiled``), and the step that runs it forward only or forward and backward."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn

from ..modeling.attentions import AttentionOutput, AttentionSettings, EfficientAttention
from .options import BASELINE, DTYPES, FLOOR, windowed
from .peers import Peer, peer_of
from .rows import Infeasible, eager_name


class FloorAttention(EfficientAttention):
    """No token mixing: ``context = V = value(X)``, ``[B, N, C] -> [B, N, C]``. Deliberately not registered."""

    name = FLOOR
    uses_query_key = False

    def forward(self, hidden_states, padding_mask=None, state=None, output_attentions=False) -> AttentionOutput:
        return AttentionOutput(self.value(hidden_states))


def layer_config(mechanism: str, args, length: int, num_layers: int = 1):
    """An ``EffAttnRobertaConfig`` of ``num_layers`` layers running ``mechanism`` (the floor starts from ``sdpa``;
    ``<name>+w<W>`` is the mechanism beside a window), dropout off."""
    from ..modeling.configuration_effattn import EffAttnRobertaConfig

    attention_type, local = windowed(BASELINE if mechanism == FLOOR else mechanism)
    window = max(local.values(), default=0)  # a model takes inputs of its window or its blocks
    return EffAttnRobertaConfig(
        attention_type=attention_type,
        **local,
        hidden_size=args.hidden_size,
        num_attention_heads=args.num_heads,
        intermediate_size=args.intermediate_size or 4 * args.hidden_size,
        num_hidden_layers=num_layers,
        max_position_embeddings=max(args.max_length or length, window),
        roberta_positions=False,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )


def floor_attention(args) -> FloorAttention:
    return FloorAttention(args.hidden_size, args.num_heads, AttentionSettings())


def build_module(mechanism: str, part: str, args, length: int) -> nn.Module:
    """The measured module on ``args.device`` in ``args.dtype``: a mechanism, an ``EffAttnRobertaLayer``, or a whole
    ``EffAttnRobertaModel`` of ``args.num_layers`` layers (part ``encoder``, no pooler); a peer's model for
    ``peer:<key>``."""
    from ..modeling.encoder import EffAttnRobertaLayer
    from ..modeling.modeling_effattn_roberta import EffAttnRobertaModel

    torch.manual_seed(args.seed)
    peer = peer_of(mechanism)
    with torch.device(args.device):  # initialised where it runs: a GPU fills the vocabulary's embedding at once
        if peer:
            module = peer.build(args, length)
        elif part == "encoder":
            module = EffAttnRobertaModel(layer_config(mechanism, args, length, args.num_layers),
                                         add_pooling_layer=False)
            if mechanism == FLOOR:
                for layer in module.encoder.layer:
                    layer.attention.self = floor_attention(args)
        else:
            layer = EffAttnRobertaLayer(layer_config(mechanism, args, length), layer_idx=0)
            if mechanism == FLOOR:
                layer.attention.self = floor_attention(args)
            module = layer if part == "layer" else layer.attention.self
    return module.to(device=args.device, dtype=DTYPES[args.dtype])


@dataclass
class Subject:
    """What is timed at one length: ``module``, the call that runs it (or its compiled form) on fixed inputs, the
    input tensor whose gradient a backward fills (None for token ids), the peer whose model it is (None for ours),
    and whether the call is compiled (its first call in each mode compiles it)."""

    module: nn.Module
    call: Callable[[], object]
    leaf: torch.Tensor | None = None
    peer: Peer | None = None
    compiled: bool = False


def build_subject(name: str, part: str, length: int, args) -> Subject:
    """The module of row ``name`` (a mechanism or a peer, or its ``@compiled`` twin) and ``part`` on random inputs of
    ``args.batch_at(length)`` sequences: hidden states ``[B, N, C]`` for a mechanism or a layer; for an encoder,
    token ids ``[B, N]`` (none of the special ids 0-2) and an all-ones attention mask, as a tokenizer returns for
    unpadded text (the same for every encoder, ours and the peers')."""
    mechanism = eager_name(name)
    peer = peer_of(mechanism)
    if peer and peer.cannot_run(length):
        raise Infeasible(peer.cannot_run(length))
    module = build_module(mechanism, part, args, length)
    runner = module if mechanism == name else torch.compile(module)
    generator = torch.Generator().manual_seed(args.seed)
    batch = args.batch_at(length)
    if part == "encoder":
        input_ids = torch.randint(3, module.config.vocab_size, (batch, length), generator=generator)
        input_ids = input_ids.to(args.device)
        attention_mask = torch.ones_like(input_ids)
        return Subject(module, lambda: runner(input_ids=input_ids, attention_mask=attention_mask), peer=peer,
                       compiled=runner is not module)
    inputs = torch.randn(batch, length, args.hidden_size, generator=generator)
    inputs = inputs.to(device=args.device, dtype=DTYPES[args.dtype]).requires_grad_(True)  # as inside a stack
    return Subject(module, lambda: runner(inputs, None, None, False), leaf=inputs, compiled=runner is not module)


def output_loss(output) -> torch.Tensor:
    """Mean of the output (``AttentionOutput.context``, a layer's ``hidden_states`` or a model's
    ``last_hidden_state``) plus its auxiliary loss, if any."""
    if isinstance(output, AttentionOutput):
        tensor = output.context
    elif getattr(output, "last_hidden_state", None) is not None:  # a model's output
        tensor = output.last_hidden_state
    else:  # a layer's LayerOutput
        tensor = output.hidden_states
    loss = tensor.float().mean()
    aux_loss = getattr(output, "aux_loss", None)
    return loss if aux_loss is None else loss + aux_loss


def make_step(subject: Subject, mode: str) -> Callable[[], None]:
    """One call of the subject's module: forward only (eval mode, no autograd), or forward and backward."""
    module = subject.module
    if mode == "fwd":
        module.eval()

        def step():
            with torch.no_grad():
                subject.call()

        return step
    module.train()

    def step():
        output_loss(subject.call()).backward()
        module.zero_grad(set_to_none=True)  # free the gradients inside the call, so that every call starts equal
        if subject.leaf is not None:
            subject.leaf.grad = None

    return step
