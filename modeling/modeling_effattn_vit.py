"""ViT-style image encoders with any registered attention mechanism, and their task heads.

The embeddings are Transformers' ``ViTEmbeddings``; the pre-LN layers take RoBERTa's parameter names. A head's loss
includes the mechanisms' auxiliary loss, also returned as ``aux_loss``.
"""

from __future__ import annotations

from .supported_versions import SUPPORTED_TRANSFORMERS  # noqa: F401, I001 - first: explains an old Transformers
import math

import torch
from torch import nn
from transformers import initialization as init
from transformers.models.vit.modeling_vit import ViTEmbeddings, ViTPooler
from transformers.utils.generic import can_return_tuple

from .configuration_effattn import EffAttnViTConfig, pair
from .encoder import EffAttnEncoder, EffAttnViTLayer
from .outputs import (
    EffAttnImageClassifierOutput,
    EffAttnMaskedImageModelingOutput,
    EffAttnModelOutput,
    head_output,
    model_output,
)
from .position_extension import interpolate_patch_positions
from .pretrained import EffAttnPreTrainedModel, register_auto_classes

# ViT checkpoints of either naming, Transformers 5's or the older one, load after this renaming: the layers take
# RoBERTa's names (attention.self.query), since the mechanism owns query/key/value.
VIT_KEY_MAPPING = {
    r"layers\.(\d+)\.": r"encoder.layer.\1.",
    r"attention\.attention\.": "attention.self.",
    r"attention\.q_proj": "attention.self.query",
    r"attention\.k_proj": "attention.self.key",
    r"attention\.v_proj": "attention.self.value",
    r"attention\.o_proj": "attention.output.dense",
    r"mlp\.fc1": "intermediate.dense",
    r"mlp\.fc2": "output.dense",
}


class EffAttnViTPreTrainedModel(EffAttnPreTrainedModel):
    """Base of the image models."""

    config_class = EffAttnViTConfig
    config: EffAttnViTConfig
    base_model_prefix = "vit"
    main_input_name = "pixel_values"
    input_modalities = ("image",)
    _no_split_modules = ["ViTEmbeddings", "EffAttnViTLayer"]
    checkpoint_key_mappings = {"vit": VIT_KEY_MAPPING}

    def _init_weights(self, module):
        super()._init_weights(module)
        if isinstance(module, ViTEmbeddings):
            init.trunc_normal_(module.position_embeddings, mean=0.0, std=self.config.initializer_range)
            init.trunc_normal_(module.cls_token, mean=0.0, std=self.config.initializer_range)
            if module.mask_token is not None:
                init.zeros_(module.mask_token)

    def extend_position_embeddings(self, config) -> None:
        """The patches' position grid resized to ``config.image_size`` (``position_extension``)."""
        interpolate_patch_positions(self.base_model.embeddings, *pair(config.image_size))


class EffAttnViTModel(EffAttnViTPreTrainedModel):
    """The bare encoder; with ``add_pooling_layer``, ViT's pooler; ``use_mask_token``: SimMIM's mask token."""

    def __init__(self, config: EffAttnViTConfig, add_pooling_layer: bool = True, use_mask_token: bool = False):
        super().__init__(config)
        self.embeddings = ViTEmbeddings(config, use_mask_token=use_mask_token)
        self.encoder = EffAttnEncoder(config, EffAttnViTLayer)
        self.layernorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.pooler = ViTPooler(config) if add_pooling_layer else None
        self.post_init()

    def get_input_embeddings(self):
        return self.embeddings.patch_embeddings

    def check_length(self, tokens: int, image_shape) -> None:
        """Raise if a larger image (``interpolate_pos_encoding``) exceeds the mechanism's maximum length."""
        attention = self.encoder.layer[0].attention.self if len(self.encoder.layer) else None
        if attention is None or not attention.needs_max_length or tokens <= attention.max_length:
            return
        height, width = image_shape
        raise ValueError(
            f"An image of {height}x{width} pixels gives {tokens - 1} patches + [CLS] = {tokens} tokens, more than "
            f"the {attention.max_length} that this model's {self.config.attention_type!r} attention was built for "
            f"(image_size={self.config.image_size}, patch_size={self.config.patch_size}): resize the images to "
            f"image_size, or extend the model to a larger image_size (hf-effattn convert CHECKPOINT --image_size "
            f"{max(height, width)}, or from_pretrained(CHECKPOINT, image_size={max(height, width)})"
            f"){attention.length_limit_fix}."
        )

    @can_return_tuple
    def forward(
        self,
        pixel_values: torch.FloatTensor,
        bool_masked_pos: torch.BoolTensor | None = None,
        interpolate_pos_encoding: bool | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
    ) -> EffAttnModelOutput:
        """``pixel_values [B, channels, H, W]`` -> ``[B, 1 + patches, C]``, pooled ``[B, C]``."""
        pixel_values = pixel_values.to(self.embeddings.patch_embeddings.projection.weight.dtype)
        embeddings = self.embeddings(
            pixel_values, bool_masked_pos=bool_masked_pos, interpolate_pos_encoding=interpolate_pos_encoding
        )
        self.check_length(embeddings.shape[1], pixel_values.shape[-2:])
        encoded = self.encoder(
            embeddings, output_attentions=output_attentions, output_hidden_states=output_hidden_states
        )
        return model_output(encoded, self.layernorm(encoded.last_hidden_state), self.pooler)


class EffAttnViTForImageClassification(EffAttnViTPreTrainedModel):
    """Classification or regression from the final [CLS] state: logits ``[B, num_labels]``."""

    def __init__(self, config: EffAttnViTConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.vit = EffAttnViTModel(config, add_pooling_layer=False)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels) if config.num_labels > 0 else nn.Identity()
        self.post_init()

    @can_return_tuple
    def forward(
        self,
        pixel_values: torch.FloatTensor,
        labels: torch.Tensor | None = None,
        interpolate_pos_encoding: bool | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
    ) -> EffAttnImageClassifierOutput:
        outputs = self.vit(
            pixel_values, interpolate_pos_encoding=interpolate_pos_encoding, output_attentions=output_attentions,
            output_hidden_states=output_hidden_states, return_dict=True,
        )
        logits = self.classifier(outputs.last_hidden_state[:, 0])
        loss = None if labels is None else self.loss_function(labels, logits, self.config)
        return head_output(EffAttnImageClassifierOutput, outputs, loss, logits=logits)


class EffAttnViTForMaskedImageModeling(EffAttnViTPreTrainedModel):
    """SimMIM: ``reconstruction [B, channels, H, W]``; L1 loss on masked patches, ``bool_masked_pos [B, patches]``."""

    def __init__(self, config: EffAttnViTConfig):
        super().__init__(config)
        self.vit = EffAttnViTModel(config, add_pooling_layer=False, use_mask_token=True)
        self.decoder = nn.Sequential(
            nn.Conv2d(config.hidden_size, config.encoder_stride**2 * config.num_channels, kernel_size=1),
            nn.PixelShuffle(config.encoder_stride),
        )
        self.post_init()

    def masked_l1_loss(self, pixel_values, reconstruction, bool_masked_pos) -> torch.Tensor:
        """Mean absolute error over the pixels of masked patches, per channel."""
        size = self.config.image_size // self.config.patch_size
        patch = self.config.patch_size
        mask = bool_masked_pos.reshape(-1, size, size).repeat_interleave(patch, 1).repeat_interleave(patch, 2)
        mask = mask.unsqueeze(1).to(reconstruction.dtype)
        error = nn.functional.l1_loss(pixel_values, reconstruction, reduction="none")
        return (error * mask).sum() / (mask.sum() + 1e-5) / self.config.num_channels

    @can_return_tuple
    def forward(
        self,
        pixel_values: torch.FloatTensor,
        bool_masked_pos: torch.BoolTensor | None = None,
        interpolate_pos_encoding: bool | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
    ) -> EffAttnMaskedImageModelingOutput:
        if bool_masked_pos is not None and self.config.patch_size != self.config.encoder_stride:
            raise ValueError(
                f"With bool_masked_pos, patch_size ({self.config.patch_size}) must equal encoder_stride "
                f"({self.config.encoder_stride}) so that the reconstruction has the input's size: set encoder_stride."
            )
        outputs = self.vit(
            pixel_values, bool_masked_pos=bool_masked_pos, interpolate_pos_encoding=interpolate_pos_encoding,
            output_attentions=output_attentions, output_hidden_states=output_hidden_states, return_dict=True,
        )
        patches = outputs.last_hidden_state[:, 1:]
        batch, length, channels = patches.shape
        side = math.floor(length**0.5)
        reconstruction = self.decoder(patches.transpose(1, 2).reshape(batch, channels, side, side))
        loss = None
        if bool_masked_pos is not None:
            loss = self.masked_l1_loss(pixel_values, reconstruction, bool_masked_pos)
        return head_output(EffAttnMaskedImageModelingOutput, outputs, loss, reconstruction=reconstruction)


AUTO_CLASSES = {
    "AutoModel": EffAttnViTModel,
    "AutoModelForImageClassification": EffAttnViTForImageClassification,
    "AutoModelForMaskedImageModeling": EffAttnViTForMaskedImageModeling,
}
register_auto_classes(EffAttnViTPreTrainedModel, AUTO_CLASSES)

__all__ = [
    "EffAttnViTPreTrainedModel", "EffAttnViTModel", "EffAttnViTForImageClassification",
    "EffAttnViTForMaskedImageModeling",
]
