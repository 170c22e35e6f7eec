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

Importing the package imports none of them: each name loads its module when first used (a module ``__getattr__``,
as Transformers' own ``_LazyModule`` does), so that ``import hf_effattn`` and the ``hf-effattn`` command start in a
fraction of a second. The ``Auto*`` classes know the package's model types by name, as soon as Transformers imports
them: it loads the config or model class from the package when it first looks one up
(:func:`_register_with_auto_classes`).
"""

import configparser
import importlib
import importlib.abc
import importlib.util
import sys
from pathlib import Path


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

_EXPORTS = {  # module, relative to the package -> the names it gives the package
    ".modeling.attentions": ("AttentionOutput", "AttentionSettings", "EfficientAttention", "build_attention",
                             "build_settings", "describe_attention", "get_attention_class", "list_attentions",
                             "register_attention", "setting"),
    ".modeling.configuration_effattn": ("EffAttnRobertaConfig", "EffAttnViTConfig"),
    ".modeling.encoder": ("EffAttnEncoder", "EffAttnRobertaLayer", "EffAttnViTLayer"),
    ".modeling.modeling_effattn_roberta": (
        "EffAttnRobertaPreTrainedModel", "EffAttnRobertaModel", "EffAttnRobertaForMaskedLM",
        "EffAttnRobertaForSequenceClassification", "EffAttnRobertaForTokenClassification",
        "EffAttnRobertaForQuestionAnswering", "EffAttnRobertaForMultipleChoice"),
    ".modeling.modeling_effattn_vit": ("EffAttnViTPreTrainedModel", "EffAttnViTModel",
                                       "EffAttnViTForImageClassification", "EffAttnViTForMaskedImageModeling"),
    ".models.presets": ("create_config", "create_model", "list_models"),
    ".block_tokens": ("tokenize_in_blocks",),
    ".conversion": ("TransferReport", "convert", "transfer_attention"),
    ".version": ("__version__",),
}
_MODULE_OF = {name: module for module, names in _EXPORTS.items() for name in names}

# Each model type -> its config class and {Auto class: model class}, by name (the modeling files' AUTO_CLASSES).
AUTO_CLASS_NAMES = {
    "effattn_roberta": ("EffAttnRobertaConfig", {
        "AutoModel": "EffAttnRobertaModel", "AutoModelForMaskedLM": "EffAttnRobertaForMaskedLM",
        "AutoModelForSequenceClassification": "EffAttnRobertaForSequenceClassification",
        "AutoModelForTokenClassification": "EffAttnRobertaForTokenClassification",
        "AutoModelForQuestionAnswering": "EffAttnRobertaForQuestionAnswering",
        "AutoModelForMultipleChoice": "EffAttnRobertaForMultipleChoice"}),
    "effattn_vit": ("EffAttnViTConfig", {
        "AutoModel": "EffAttnViTModel", "AutoModelForImageClassification": "EffAttnViTForImageClassification",
        "AutoModelForMaskedImageModeling": "EffAttnViTForMaskedImageModeling"}),
}


def __getattr__(name: str):
    """A name of the package (:data:`_EXPORTS`), loaded from its module on first use, or a submodule."""
    if name in _MODULE_OF:
        value = getattr(importlib.import_module(_MODULE_OF[name], __name__), name)
        globals()[name] = value
        return value
    if importlib.util.find_spec(f"{__name__}.{name}") is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return importlib.import_module(f".{name}", __name__)


def __dir__() -> list[str]:
    return sorted({*globals(), *_MODULE_OF})


def _register_configs(configuration_auto) -> None:
    """``AutoConfig`` knows our model types by name, as it knows Transformers' own: its lazy mapping reads the config
    class's name from its table and the class from its module, here this package, whose ``__getattr__`` loads it when
    first looked up (``AutoConfig.from_pretrained``)."""
    mapping, package = configuration_auto.CONFIG_MAPPING, sys.modules[__name__]
    for model_type, (config_name, _) in AUTO_CLASS_NAMES.items():
        mapping._mapping[model_type] = config_name
        mapping._modules[configuration_auto.model_type_to_module_name(model_type)] = package


def _register_models(modeling_auto) -> None:
    """Every ``Auto*`` class knows our heads by name, as :func:`_register_configs` makes ``AutoConfig`` know our
    configs (loaded from this package when first looked up: ``AutoModel.from_pretrained``)."""
    from transformers.models.auto.configuration_auto import model_type_to_module_name as module_name

    package = sys.modules[__name__]
    for model_type, (config_name, auto_classes) in AUTO_CLASS_NAMES.items():
        for auto_class, model_name in auto_classes.items():
            mapping = getattr(modeling_auto, auto_class)._model_mapping
            mapping._model_mapping[model_type] = model_name
            mapping._config_mapping[model_type] = config_name
            mapping._reverse_config_mapping[config_name] = model_type
            mapping._modules[module_name(model_type)] = package


_REGISTRATIONS = {"transformers.models.auto.configuration_auto": _register_configs,
                  "transformers.models.auto.modeling_auto": _register_models}


class _RegisterOnImport(importlib.abc.MetaPathFinder):
    """Registers our names (:data:`_REGISTRATIONS`) with each of Transformers' auto modules as it finishes importing:
    ``import hf_effattn`` imports no Transformers module, and Transformers imports its ``Auto*`` classes lazily."""

    def find_spec(self, fullname, path, target=None):
        if fullname not in _REGISTRATIONS:
            return None
        finders = (finder for finder in sys.meta_path if finder is not self and hasattr(finder, "find_spec"))
        spec = next((found for finder in finders if (found := finder.find_spec(fullname, path, target))), None)
        if spec is not None and spec.loader is not None:
            execute = spec.loader.exec_module

            def exec_module(module):
                execute(module)
                _REGISTRATIONS[fullname](module)

            spec.loader.exec_module = exec_module
        return spec


def _register_with_auto_classes() -> None:
    """Register our names with Transformers' auto modules already imported, and with the others once imported."""
    for name, register in _REGISTRATIONS.items():
        if name in sys.modules:
            register(sys.modules[name])
    if not all(name in sys.modules for name in _REGISTRATIONS):
        sys.meta_path.insert(0, _RegisterOnImport())


_register_with_auto_classes()

__all__ = [name for name in _MODULE_OF if name not in ("convert", "__version__")]  # those of ``import *``
