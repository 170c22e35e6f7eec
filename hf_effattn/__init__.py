"""hf_effattn: efficient, linear-cost attention mechanisms for Hugging Face Transformers encoders.

The package surface: the registry of mechanisms (``list_attentions``, ``register_attention``,
``build_attention``, ``describe_attention``). The model code itself lives in the flat folder
``hf_effattn/modeling`` so that saved checkpoints carry it as remote code.
"""

from .modeling.attentions import (
    AttentionOutput,
    AttentionSettings,
    EfficientAttention,
    build_attention,
    build_settings,
    describe_attention,
    get_attention_class,
    list_attentions,
    register_attention,
)

__version__ = "0.1.0"

__all__ = [
    "AttentionOutput", "AttentionSettings", "EfficientAttention", "build_attention", "build_settings",
    "describe_attention", "get_attention_class", "list_attentions", "register_attention",
]
