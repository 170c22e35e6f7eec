"""A small encoder for the synthetic tasks: input embedding + learned positions, the package's encoder stack
with any registered mechanism, pooling, and a regression or classification head."""

from __future__ import annotations

import torch
from torch import nn

from ..modeling.configuration_effattn import EffAttnRobertaConfig
from ..modeling.encoder import EffAttnEncoder, EffAttnRobertaLayer, EffAttnViTLayer

POOLINGS = ("mean", "first")
NORM_STYLES = {"pre": EffAttnViTLayer, "post": EffAttnRobertaLayer}


def encoder_config(*, attention: str, attention_config: dict | None, length: int, hidden_size: int,
                   num_heads: int, num_layers: int, dropout: float) -> EffAttnRobertaConfig:
    """Configuration of the encoder stack: ``num_layers`` layers of width ``hidden_size`` (feed-forward 4x) whose
    mechanisms are built for inputs of up to ``length`` tokens."""
    return EffAttnRobertaConfig(
        hidden_size=hidden_size,
        num_attention_heads=num_heads,
        intermediate_size=4 * hidden_size,
        num_hidden_layers=num_layers,
        attention_type=attention,
        attention_config=attention_config,
        max_position_embeddings=length,
        roberta_positions=False,
        hidden_dropout_prob=dropout,
        attention_probs_dropout_prob=dropout,
    )


class SyntheticTaskModel(nn.Module):
    """``inputs`` (token ids ``[B, N]`` or vectors ``[B, N, input_dim]``) -> ``[B, num_outputs]``.

    Token ids go through an ``nn.Embedding(vocab_size, C)``; real-valued inputs (the adding problem's 2-d pairs)
    through an ``nn.Linear(input_dim, C)``, as the PSF paper augments them. Learned positions are added, then a
    LayerNorm, the encoder stack (pre-LN layers with a final LayerNorm, or post-LN RoBERTa layers), pooling
    over the real tokens (``mean``) or the first token (``first``), and a linear head.
    """

    def __init__(self, config: EffAttnRobertaConfig, num_outputs: int, *, vocab_size: int | None = None,
                 input_dim: int | None = None, pooling: str = "mean", norm_style: str = "pre"):
        super().__init__()
        if (vocab_size is None) == (input_dim is None):
            raise ValueError("Give exactly one of vocab_size (token inputs) and input_dim (vector inputs).")
        if pooling not in POOLINGS or norm_style not in NORM_STYLES:
            raise ValueError(f"pooling must be one of {POOLINGS} and norm_style one of {tuple(NORM_STYLES)}.")
        width = config.hidden_size
        self.pooling = pooling
        self.embed = nn.Embedding(vocab_size, width) if vocab_size else nn.Linear(input_dim, width)
        self.positions = nn.Embedding(config.max_position_embeddings, width)
        self.embedding_norm = nn.LayerNorm(width, eps=config.layer_norm_eps)
        self.encoder = EffAttnEncoder(config, NORM_STYLES[norm_style])
        self.final_norm = nn.LayerNorm(width, eps=config.layer_norm_eps) if norm_style == "pre" else nn.Identity()
        self.head = nn.Linear(width, num_outputs)

    def pool(self, hidden_states: torch.Tensor, padding_mask: torch.Tensor | None) -> torch.Tensor:
        """``[B, N, C] -> [B, C]``: the first token, or the mean over real tokens."""
        if self.pooling == "first":
            return hidden_states[:, 0]
        if padding_mask is None:
            return hidden_states.mean(1)
        weights = padding_mask.to(hidden_states.dtype)[..., None]
        return (hidden_states * weights).sum(1) / weights.sum(1).clamp(min=1)

    def forward(self, inputs: torch.Tensor, padding_mask: torch.Tensor | None = None
                ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Outputs ``[B, num_outputs]`` and the mechanisms' auxiliary loss (scalar, training only, or None)."""
        positions = torch.arange(inputs.shape[1], device=inputs.device)
        hidden_states = self.embedding_norm(self.embed(inputs) + self.positions(positions))
        encoded = self.encoder(hidden_states, padding_mask)
        pooled = self.pool(self.final_norm(encoded.last_hidden_state), padding_mask)
        return self.head(pooled), encoded.aux_loss
