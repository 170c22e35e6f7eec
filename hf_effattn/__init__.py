"""hf_effattn: efficient, linear-cost attention mechanisms for Hugging Face Transformers encoders.

The package surface:

* the registry of mechanisms (``list_attentions``, ``register_attention``, ``build_attention``,
  ``describe_attention``; ``setting`` declares a new mechanism's settings);
* the Transformers classes: configs (``EffAttnRobertaConfig``, ``EffAttnViTConfig``), encoders and heads
  (``EffAttnRoberta*``, ``EffAttnViT*``), registered with the ``Auto*`` classes on import;
* model presets (``list_models``, ``create_model``);
* attention transfer (``transfer_attention``), which trains a converted model's new attention to reproduce its
  source's softmax attention;
* ``tokenize_in_blocks``: long inputs framed by [CLS] and [SEP] at every aligned block, as a checkpoint read its
  chunks (models with ``local_block``).

The model code itself lives in the flat folder ``modeling/`` at the top of the repository, installed as
``hf_effattn.modeling``, so that saved checkpoints carry it as remote code.
"""

import configparser
import importlib.util
import sys
from pathlib import Path

import transformers


def _map_checkout_subpackages() -> None:
    """Python started in a source checkout imports this folder, not the installed package; the checkout keeps
    ``modeling/`` and ``model_cards/`` beside it, and only an install maps them into the package (``setup.cfg``'s
    ``package_dir``; an editable install keeps mapping them). Without one (``pip install .``, then Python started in
    the checkout's root), map them from their folders here, as ``setup.cfg`` does."""
    setup = Path(__file__).resolve().parents[1] / "setup.cfg"
    if not setup.is_file():
        return
    config = configparser.ConfigParser()
    config.read(setup)
    for line in config["options"]["package_dir"].strip().splitlines():
        name, folder = (part.strip() for part in line.split("="))
        if importlib.util.find_spec(name) is not None:
            continue
        spec = importlib.util.spec_from_file_location(name, setup.parent / folder / "__init__.py",
                                                      submodule_search_locations=[str(setup.parent / folder)])
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        package, _, subpackage = name.rpartition(".")
        setattr(sys.modules[package], subpackage, module)


_map_checkout_subpackages()

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
    setting,
)
from .modeling.configuration_effattn import EffAttnRobertaConfig, EffAttnViTConfig
from .modeling.encoder import EffAttnEncoder, EffAttnRobertaLayer, EffAttnViTLayer
from .modeling.modeling_effattn_roberta import AUTO_CLASSES as _TEXT_AUTO_CLASSES
from .modeling.modeling_effattn_roberta import (
    EffAttnRobertaForMaskedLM,
    EffAttnRobertaForMultipleChoice,
    EffAttnRobertaForQuestionAnswering,
    EffAttnRobertaForSequenceClassification,
    EffAttnRobertaForTokenClassification,
    EffAttnRobertaModel,
    EffAttnRobertaPreTrainedModel,
)
from .modeling.modeling_effattn_vit import AUTO_CLASSES as _VISION_AUTO_CLASSES
from .modeling.modeling_effattn_vit import (
    EffAttnViTForImageClassification,
    EffAttnViTForMaskedImageModeling,
    EffAttnViTModel,
    EffAttnViTPreTrainedModel,
)
from .presets import create_config, create_model, list_models
from .block_tokens import tokenize_in_blocks
from .conversion import TransferReport, convert, transfer_attention
from .version import __version__


def _register_with_auto_classes() -> None:
    """``AutoConfig`` knows our model types, and every ``Auto*`` class our heads."""
    for config_class, auto_classes in (
        (EffAttnRobertaConfig, _TEXT_AUTO_CLASSES), (EffAttnViTConfig, _VISION_AUTO_CLASSES)
    ):
        transformers.AutoConfig.register(config_class.model_type, config_class, exist_ok=True)
        for auto_class, model_class in auto_classes.items():
            getattr(transformers, auto_class).register(config_class, model_class, exist_ok=True)


_register_with_auto_classes()

__all__ = [
    "AttentionOutput", "AttentionSettings", "EfficientAttention", "build_attention", "build_settings",
    "describe_attention", "get_attention_class", "list_attentions", "register_attention", "setting",
    "EffAttnRobertaConfig", "EffAttnViTConfig", "EffAttnEncoder", "EffAttnRobertaLayer", "EffAttnViTLayer",
    "EffAttnRobertaPreTrainedModel", "EffAttnRobertaModel", "EffAttnRobertaForMaskedLM",
    "EffAttnRobertaForSequenceClassification", "EffAttnRobertaForTokenClassification",
    "EffAttnRobertaForQuestionAnswering", "EffAttnRobertaForMultipleChoice",
    "EffAttnViTPreTrainedModel", "EffAttnViTModel", "EffAttnViTForImageClassification",
    "EffAttnViTForMaskedImageModeling", "create_config", "create_model", "list_models",
    "TransferReport", "transfer_attention", "tokenize_in_blocks",
]
