"""Configurations of the efficient-attention encoders: RoBERTa's and ViT's, plus the attention mechanism.

Both add two fields, saved in ``config.json``:

* ``attention_type``: a registered mechanism (``list_attentions()``), default ``"sdpa"`` (exact softmax
  attention, the arithmetic of the Transformers classes).
* ``attention_config``: a dict of that mechanism's settings. Missing keys take the paper defaults; the
  stored dict is always complete, so a saved model does not depend on later changes of defaults.

Both are validated when the config is built: an unknown type lists the known ones, a setting that does not
fit the model's shape (width, heads, maximum length) names the setting and what is allowed.

The mechanisms' maximum length (``attention_max_length``) is the longest input the embeddings can
position: for RoBERTa ``max_position_embeddings - pad_token_id - 1`` (positions start at
``pad_token_id + 1``), for BERT-style positions (``roberta_positions=False``) ``max_position_embeddings``,
for ViT the number of patches plus the [CLS] token.
"""

from __future__ import annotations

from .supported_versions import SUPPORTED_TRANSFORMERS  # noqa: F401, I001 - first: explains an old Transformers
from transformers import RobertaConfig, ViTConfig

from .attentions import build_settings


class EffAttnConfigMixin:
    """Validation and normalisation of ``attention_type`` / ``attention_config``, shared by both configs."""

    @property
    def attention_max_length(self) -> int:
        """The longest input (in tokens) that the model can embed."""
        raise NotImplementedError

    @classmethod
    def from_dict(cls, config_dict: dict, **kwargs):
        """As :meth:`transformers.PreTrainedConfig.from_dict`, where an ``attention_type`` or ``attention_config``
        among ``kwargs`` (as ``AutoConfig`` / ``AutoModel*.from_pretrained(folder, attention_type=...)`` pass them;
        ``None`` keeps the saved value) replaces the saved one before validation. Another ``attention_type``
        starts from its own defaults, never from the saved mechanism's settings."""
        config_dict = dict(config_dict)
        attention_type, attention_config = kwargs.pop("attention_type", None), kwargs.pop("attention_config", None)
        if attention_type is not None and attention_type != config_dict.get("attention_type", "sdpa"):
            config_dict.update(attention_type=attention_type, attention_config=None)
        if attention_config is not None:
            config_dict["attention_config"] = attention_config
        return super().from_dict(config_dict, **kwargs)

    def setup_attention(self) -> None:
        """Check the model shape and the mechanism settings; store the complete settings dict."""
        if self.hidden_size % self.num_attention_heads:
            divisors = [h for h in range(1, self.hidden_size + 1) if self.hidden_size % h == 0]
            closest = sorted(sorted(divisors, key=lambda h: abs(h - self.num_attention_heads))[:3])
            raise ValueError(
                f"hidden_size={self.hidden_size} is not divisible by num_attention_heads={self.num_attention_heads}: "
                f"choose a head count that divides the width (the closest: one of {closest})."
            )
        settings = build_settings(self.attention_type, self.attention_config)
        settings.check(self.hidden_size, self.num_attention_heads, self.attention_max_length)
        self.attention_config = settings.to_dict()


class EffAttnRobertaConfig(EffAttnConfigMixin, RobertaConfig):
    r"""A RoBERTa configuration whose self-attention is ``attention_type``.

    Args (beyond :class:`~transformers.RobertaConfig`'s):
        attention_type (`str`, defaults to `"sdpa"`): a registered attention mechanism.
        attention_config (`dict`, *optional*): that mechanism's settings (paper defaults for missing keys).
        roberta_positions (`bool`, defaults to `True`): position ids as RoBERTa computes them (real tokens
            numbered from ``pad_token_id + 1``, pads at ``pad_token_id``); `False` gives BERT's ``0 .. N-1``,
            set when converting a BERT checkpoint.
    """

    model_type = "effattn_roberta"

    attention_type: str = "sdpa"
    attention_config: dict | None = None
    roberta_positions: bool = True

    def __post_init__(self, **kwargs):
        super().__post_init__(**kwargs)
        self.setup_attention()

    @property
    def attention_max_length(self) -> int:
        if self.roberta_positions:
            return self.max_position_embeddings - self.pad_token_id - 1
        return self.max_position_embeddings


class EffAttnViTConfig(EffAttnConfigMixin, ViTConfig):
    r"""A ViT configuration whose self-attention is ``attention_type``.

    Args (beyond :class:`~transformers.ViTConfig`'s):
        attention_type (`str`, defaults to `"sdpa"`): a registered attention mechanism.
        attention_config (`dict`, *optional*): that mechanism's settings (paper defaults for missing keys).
    """

    model_type = "effattn_vit"

    attention_type: str = "sdpa"
    attention_config: dict | None = None

    def __post_init__(self, **kwargs):
        super().__post_init__(**kwargs)
        self.setup_attention()

    @property
    def attention_max_length(self) -> int:
        height, width = pair(self.image_size)
        patch_height, patch_width = pair(self.patch_size)
        return (height // patch_height) * (width // patch_width) + 1


def pair(value) -> tuple[int, int]:
    """``value`` as a ``(height, width)`` pair."""
    return tuple(value) if isinstance(value, (list, tuple)) else (value, value)
