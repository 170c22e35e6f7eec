"""The layer stack shared by the text and vision encoders.

A layer is self-attention (a registered mechanism, see ``attentions.py``) and a feed-forward block, each
with a residual connection, in one of two arrangements:

* :class:`EffAttnRobertaLayer`, post-LN (RoBERTa/BERT)::

      h = LayerNorm(x + dropout(W_o attention(x)))
      y = LayerNorm(h + dropout(W_2 act(W_1 h)))

* :class:`EffAttnViTLayer`, pre-LN (ViT)::

      h = x + dropout(W_o attention(LayerNorm(x)))
      y = h + dropout(W_2 act(W_1 LayerNorm(h)))

Both use RoBERTa's parameter names, so that RoBERTa and BERT checkpoints load as they are and ViT
checkpoints load after a renaming (see ``modeling_effattn_vit.py``)::

    attention.self.{query,key,value,...}   the mechanism (PSF has no query/key)
    attention.output.dense                 W_o           (+ attention.output.LayerNorm, post-LN)
    intermediate.dense                     W_1
    output.dense                           W_2           (+ output.LayerNorm, post-LN)
    layernorm_before, layernorm_after      pre-LN only

A layer can be used alone, for example to time one full encoder layer::

    layer = EffAttnRobertaLayer(config, layer_idx=0)
    hidden_states, state, aux_loss, attentions = layer(x, padding_mask)   # x: [B, N, C], padding_mask: [B, N]

:class:`EffAttnEncoder` stacks layers, hands each mechanism's ``state`` to the next layer, and takes the
plain mean of the auxiliary losses of the layers that return one. It reads only the mechanisms' contract,
never their names.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import torch
from torch import nn
from transformers.activations import ACT2FN
from transformers.modeling_layers import GradientCheckpointingLayer

from .attentions import build_attention
from .outputs import EffAttnEncoderOutput


class LayerOutput(NamedTuple):
    """As :class:`AttentionOutput`, ``hidden_states [B, N, C]`` for ``context``."""

    hidden_states: torch.Tensor
    state: Any = None
    aux_loss: torch.Tensor | None = None
    attentions: torch.Tensor | None = None


class EffAttnResidual(nn.Module):
    """``LayerNorm(residual + dropout(dense(x)))``, no LayerNorm pre-LN."""

    def __init__(self, in_features: int, config, post_norm: bool):
        super().__init__()
        self.dense = nn.Linear(in_features, config.hidden_size)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps) if post_norm else nn.Identity()

    def forward(self, hidden_states: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(self.dropout(self.dense(hidden_states)) + residual)


class EffAttnAttention(nn.Module):
    """``self``: the mechanism (and local part); ``output``: projection, residual."""

    def __init__(self, config, layer_idx: int, post_norm: bool):
        super().__init__()
        self.self = build_attention(
            config.attention_type, config.hidden_size, config.num_attention_heads, config.attention_config,
            local=config.local_part, max_length=config.attention_max_length, layer_idx=layer_idx,
            attention_dropout=config.attention_probs_dropout_prob, qkv_bias=getattr(config, "qkv_bias", True),
        )
        self.output = EffAttnResidual(config.hidden_size, config, post_norm)


class EffAttnIntermediate(nn.Module):
    """``act(W_1 x)``: ``[B, N, C] -> [B, N, intermediate_size]``."""

    def __init__(self, config):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.intermediate_size)
        self.intermediate_act_fn = ACT2FN[config.hidden_act]

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.intermediate_act_fn(self.dense(hidden_states))


class EffAttnLayer(GradientCheckpointingLayer):
    """A layer's modules; subclasses arrange them post- or pre-LN."""

    post_norm: bool

    def __init__(self, config, layer_idx: int = 0):
        super().__init__()
        self.attention = EffAttnAttention(config, layer_idx, self.post_norm)
        self.intermediate = EffAttnIntermediate(config)
        self.output = EffAttnResidual(config.intermediate_size, config, self.post_norm)


class EffAttnRobertaLayer(EffAttnLayer):
    """Post-LN layer with RoBERTa's parameter names."""

    post_norm = True

    def forward(self, hidden_states, padding_mask=None, state=None, output_attentions=False) -> LayerOutput:
        attention = self.attention.self(hidden_states, padding_mask, state, output_attentions)
        hidden_states = self.attention.output(attention.context, hidden_states)
        hidden_states = self.output(self.intermediate(hidden_states), hidden_states)
        return LayerOutput(hidden_states, attention.state, attention.aux_loss, attention.attentions)


class EffAttnViTLayer(EffAttnLayer):
    """Pre-LN layer with ViT's layer norms (``layernorm_before``, ``layernorm_after``)."""

    post_norm = False

    def __init__(self, config, layer_idx: int = 0):
        super().__init__(config, layer_idx)
        self.layernorm_before = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.layernorm_after = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)

    def forward(self, hidden_states, padding_mask=None, state=None, output_attentions=False) -> LayerOutput:
        attention = self.attention.self(self.layernorm_before(hidden_states), padding_mask, state, output_attentions)
        hidden_states = self.attention.output(attention.context, hidden_states)
        hidden_states = self.output(self.intermediate(self.layernorm_after(hidden_states)), hidden_states)
        return LayerOutput(hidden_states, attention.state, attention.aux_loss, attention.attentions)


class EffAttnEncoder(nn.Module):
    """``config.num_hidden_layers`` layers, each handing ``state`` to the next."""

    def __init__(self, config, layer_class: type[EffAttnLayer]):
        super().__init__()
        self.config = config
        self.layer = nn.ModuleList(layer_class(config, layer_idx=i) for i in range(config.num_hidden_layers))

    def forward(self, hidden_states: torch.Tensor, padding_mask: torch.Tensor | None = None,
                output_attentions: bool | None = None,
                output_hidden_states: bool | None = None) -> EffAttnEncoderOutput:
        """``hidden_states [B, N, C]`` through the layers."""
        if output_attentions is None:
            output_attentions = self.config.output_attentions
        if output_hidden_states is None:
            output_hidden_states = self.config.output_hidden_states
        all_hidden_states = (hidden_states,) if output_hidden_states else None
        all_attentions = () if output_attentions else None
        aux_losses = []
        state = None
        for layer in self.layer:
            # tensors positional: checkpointing re-runs a layer with those only
            hidden_states, state, aux_loss, attentions = layer(
                hidden_states, padding_mask, state, output_attentions=output_attentions
            )
            if aux_loss is not None:
                aux_losses.append(aux_loss)
            if output_hidden_states:
                all_hidden_states += (hidden_states,)
            if output_attentions:
                all_attentions += (attentions,)
        aux_loss = torch.stack(aux_losses).mean() if aux_losses else None
        return EffAttnEncoderOutput(hidden_states, all_hidden_states, all_attentions, aux_loss)
