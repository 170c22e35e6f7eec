"""LoRA fine-tuning with PEFT (``--lora_r``), and the adapter folders that reload exactly in a new process.

A converted model's attention has parameters that its source checkpoint lacks (Singularformer's pooling,
Kerformer's SE-K, DBA's compression and reconstruction, PSF's factors): a plain LoRA adapter would leave them
frozen at their random initialisation and unsaved, so the adapter would not reproduce elsewhere. Here:

* LoRA adapts ``--lora_target_modules`` (default: the mechanism's projections, ``query`` and ``value``, or
  ``value`` alone for a mechanism without query and key, such as PSF), with ``--lora_r``, ``--lora_alpha`` and
  ``--lora_dropout``; the classification head (``classifier``) is trained in full and saved with the adapter;
* the mechanism's own parameters (everything in ``attention.self`` but its projections) are trained in full too;
* a saved folder holds the adapter (``adapter_config.json``, ``adapter_model.safetensors``) and, in
  ``base_model/``, its base: the model without LoRA, the trained mechanism parameters included, saved Hub-ready
  (``config.json`` with ``auto_map``). The adapter's ``base_model_name_or_path`` names that folder, so that
  ``AutoPeftModelForSequenceClassification.from_pretrained(folder)`` (with ``import hf_effattn``, or with
  ``trust_remote_code=True``) and ``PeftModel.from_pretrained(EffAttn...from_pretrained(folder/base_model),
  folder)`` rebuild the same model.
"""

from __future__ import annotations

import logging
from pathlib import Path

from torch import nn

from ..conversion.transfer import PROJECTIONS
from ..modeling.attentions import get_attention_class
from ..modeling.modeling_effattn_roberta import EffAttnRobertaForSequenceClassification

logger = logging.getLogger(__name__)

BASE_DIR = "base_model"
HEAD_MODULES = ["classifier"]


def default_target_modules(model) -> list[str]:
    """The mechanism's projections that LoRA adapts by default: ``query`` and ``value`` (as PEFT does for RoBERTa
    and BERT), or ``value`` alone for a mechanism without query and key (PSF, unless a local window brings them)."""
    with_query = get_attention_class(model.config.attention_type).uses_query_key
    return ["query", "value"] if with_query or model.config.local_part else ["value"]


def check_target_modules(model, target_modules: list[str]) -> None:
    """Raise when a ``--lora_target_modules`` name matches no linear layer of ``model``."""
    linear = {name.rsplit(".", 1)[-1] for name, module in model.named_modules() if isinstance(module, nn.Linear)}
    unknown = [name for name in target_modules if name not in linear]
    if unknown:
        raise ValueError(f"--lora_target_modules {' '.join(unknown)}: no such linear layer in the "
                         f"{model.config.attention_type!r} model; choose among {' '.join(sorted(linear))}.")


def lora_config(args, model):
    """PEFT's ``LoraConfig`` for ``model`` from the ``--lora_*`` options."""
    from peft import LoraConfig

    target_modules = args.lora_target_modules or default_target_modules(model)
    check_target_modules(model, target_modules)
    is_text = isinstance(model, EffAttnRobertaForSequenceClassification)  # else an image classifier
    return LoraConfig(
        r=args.lora_r, lora_alpha=args.lora_alpha, lora_dropout=args.lora_dropout, target_modules=target_modules,
        task_type="SEQ_CLS" if is_text else None, modules_to_save=None if is_text else HEAD_MODULES,
    )


def mechanism_parameters(model) -> list[tuple[str, nn.Parameter]]:
    """The attention's own parameters, those no softmax checkpoint has (everything in each layer's
    ``attention.self`` but its query/key/value projections): ``(name, parameter)`` pairs."""
    pairs = []
    for name, parameter in model.named_parameters():
        _, found, own_name = name.partition(".attention.self.")
        if found and not own_name.startswith(PROJECTIONS):
            pairs.append((name, parameter))
    return pairs


def add_lora(args, model):
    """``model`` wrapped for LoRA training when ``--lora_r`` is given (else ``model`` itself); the mechanism's own
    parameters train as well."""
    check_lora_arguments(args)
    if args.lora_r is None:
        return model
    try:
        from peft import get_peft_model
    except ImportError:
        raise ImportError('--lora_r needs PEFT: pip install "hf_effattn[peft]" (or pip install peft).') from None

    peft_model = get_peft_model(model, lora_config(args, model))
    for _, parameter in mechanism_parameters(peft_model):
        parameter.requires_grad_(True)
    trainable, total = peft_model.get_nb_trainable_parameters()
    logger.info(f"LoRA (r={args.lora_r}, alpha={args.lora_alpha}, target_modules="
                f"{sorted(peft_model.peft_config['default'].target_modules)}) plus the head and the mechanism's own "
                f"parameters: {trainable:,} of {total:,} parameters train ({100 * trainable / total:.2f}%).")
    return peft_model


def check_lora_arguments(args) -> None:
    """Raise when LoRA settings are given without ``--lora_r``, or are out of range."""
    if args.lora_r is None:
        if args.lora_target_modules:
            raise ValueError("--lora_target_modules applies to LoRA: pass --lora_r too (e.g. --lora_r 8).")
        return
    if args.lora_r < 1:
        raise ValueError(f"--lora_r must be a positive integer, got {args.lora_r}.")
    if not 0 <= args.lora_dropout < 1:
        raise ValueError(f"--lora_dropout must be in [0, 1), got {args.lora_dropout}.")


def is_peft_model(model) -> bool:
    """Whether ``model`` is a PEFT model (without importing peft when it is not installed)."""
    return any(cls.__module__.startswith("peft.") for cls in type(model).__mro__)


def lora_settings(model) -> dict:
    """The LoRA settings a model card reports (none for a model trained in full)."""
    if not is_peft_model(model):
        return {}
    config = model.peft_config["default"]
    return {"lora_r": config.r, "lora_alpha": config.lora_alpha, "lora_dropout": config.lora_dropout,
            "lora_target_modules": ", ".join(sorted(config.target_modules))}


def base_state_dict(state_dict: dict) -> dict:
    """The base model's weights, under its own names, from a PEFT model's full ``state_dict``: LoRA and copies of
    the trained head left out, LoRA-wrapped layers' weights renamed back."""
    base = {}
    for key, tensor in state_dict.items():
        if "lora_" in key or ".modules_to_save." in key:
            continue
        name = key.removeprefix("base_model.model.").replace(".base_layer.", ".").replace(".original_module.", ".")
        base[name] = tensor
    return base


def save_adapter_folder(model, folder, state_dict: dict | None = None, is_main_process: bool = True,
                        save_function=None, final_folder=None) -> None:
    """Save PEFT ``model``'s adapter into ``folder`` and its base (the model without LoRA, the trained mechanism
    parameters included) into ``folder/base_model``, named as the adapter's base. ``state_dict``: ``model``'s full
    one (default ``model.state_dict()``; under Accelerate, ``accelerator.get_state_dict(model)``).
    ``final_folder``: where ``folder`` is renamed to once complete (a crash-safe save), so that the adapter names
    its base where it will be."""
    state_dict = model.state_dict() if state_dict is None else state_dict
    base = model.get_base_model()
    base.save_pretrained(Path(folder) / BASE_DIR, state_dict=base_state_dict(state_dict),
                         is_main_process=is_main_process,
                         **({} if save_function is None else {"save_function": save_function}))
    config = model.peft_config["default"]
    config.base_model_name_or_path = str((Path(final_folder or folder) / BASE_DIR).resolve())
    # The targets are linear layers, never the embeddings: no vocabulary check, which would look the base up
    # before it is in place (a crash-safe save) or on the Hub.
    model.save_pretrained(folder, state_dict=state_dict, is_main_process=is_main_process, save_embedding_layers=False)
