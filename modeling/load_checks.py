"""What a load is checked against before any weight is read, from the checkpoint's ``config.json`` alone, and the
plan it then carries out (``pretrained.py``: :meth:`~.pretrained.EffAttnPreTrainedModel.plan_load` runs these checks,
:meth:`~.pretrained.EffAttnPreTrainedModel.from_plan` carries out the :class:`LoadPlan`)."""

from __future__ import annotations

from dataclasses import dataclass

from transformers import PreTrainedConfig
from transformers.utils import logging

from .attentions import build_settings
from .configuration_effattn import EffAttnConfigMixin, saved_attention

logger = logging.get_logger(__name__)


@dataclass
class LoadPlan:
    """A load that :meth:`EffAttnPreTrainedModel.plan_load` checked and :meth:`~EffAttnPreTrainedModel.from_plan`
    carries out: the checkpoint, its ``config.json`` (``source``), our config at the checkpoint's input size
    (``saved``: what its weights load into) and at the requested one (``target``: what the model is extended to),
    and the other arguments of ``from_pretrained`` (``key_mapping`` set for a source architecture)."""

    path: str
    source: dict
    saved: PreTrainedConfig
    target: PreTrainedConfig
    kwargs: dict


def check_size_arguments(cls, kwargs: dict) -> None:
    """Raise for the input size argument of another family among ``kwargs`` (``image_size`` for a text model,
    ``max_length`` for an image model), which the model's ``__init__`` would refuse with a bare ``TypeError``."""
    own = cls.config_class.size_argument
    for config_class in EffAttnConfigMixin.__subclasses__():
        other = config_class.size_argument
        if other != own and other in kwargs:
            raise ValueError(f"{other}={kwargs[other]!r} does not apply to {cls.__name__}, whose input size is set by "
                             f"{own}: pass {own}=... to extend it, or load the checkpoint with the model class of its "
                             "own family.")


def check_block_period(block: int | None, period: int | None, checkpoint_block: int | None = None) -> None:
    """Raise unless aligned blocks of ``block`` tokens restart positions copied with ``period`` (either None: nothing
    to check): with Longformer's copy the token of rank t has position row ``t mod L``, so that only blocks of L
    tokens read each block as the checkpoint read its inputs (``local_blocks.py``). A checkpoint that already read
    blocks of ``block`` (``checkpoint_block``) at a multiple of it, trained there (its positions no longer repeat)
    and extended again, keeps them: each block reads the positions of a block it was trained on."""
    if block is None or period is None or block == period:
        return
    if block == checkpoint_block and period % block == 0:
        return
    raise ValueError(
        f"local_block={block} differs from the period of this model's positions: they were extended by copying "
        f"its {period} learned positions, so blocks of {period} tokens restart them (each block read as the "
        f"checkpoint read {period} tokens) and blocks of {block} would not: set local_block={period} "
        f"(hf-effattn convert --local_block {period})."
    )


def without_file_keys(config_dict: dict) -> dict:
    """A ``config.json`` dict without the keys that name the file's model and code, not its values."""
    return {k: v for k, v in config_dict.items() if k not in ("model_type", "auto_map", "architectures",
                                                               "transformers_version")}


def check_same_attention(source: dict, config, path, convert_attention: bool) -> None:
    """Raise when ``config`` asks for another mechanism, other settings or another local part than the checkpoint of
    this family was saved with, unless ``convert_attention`` (then log the conversion)."""
    saved_type, saved_settings, saved_local = saved_attention(source)
    requested_type, requested_settings, requested_local = saved_attention(config.to_dict())
    if (saved_type, saved_local) == (requested_type, requested_local) \
            and build_settings(saved_type, saved_settings) == build_settings(requested_type, requested_settings):
        return
    described = [described_attention(saved_type, saved_settings, saved_local),
                 described_attention(requested_type, requested_settings, requested_local)]
    if not convert_attention:
        raise ValueError(
            f"{path} was saved with {described[0]}, but {described[1]} was asked for: its attention weights "
            "would be dropped or misread. Load it without attention_type/attention_config (or the local part's "
            "settings), or pass convert_attention=True (--convert_attention on the command line) to convert it "
            "explicitly (shared weights are reused, the others initialised; both are listed)."
        )
    dropped = dropped_local_part(saved_local, requested_local)
    logger.warning(f"Converting {path} from {described[0]} to {described[1]}.{dropped}")


def described_attention(attention_type: str, settings: dict | None, local: dict) -> str:
    """``attention_type=..., attention_config=...`` and the local part's settings, as a load names an attention."""
    return f"attention_type={attention_type!r}, attention_config={settings}" + "".join(
        f", {name}={value!r}" for name, value in local.items())


def dropped_local_part(saved: dict, requested: dict) -> str:
    """A sentence naming the checkpoint's local part (``local_block`` / ``local_window``) that the requested settings
    do not keep (another ``attention_type`` starts from its own defaults), and how to keep it; else ""."""
    lost = {name: value for name in ("local_block", "local_window")
            if (value := saved.get(name)) is not None and requested.get(name) is None}
    if not lost:
        return ""
    keep = ", ".join(f"{name}={value}" for name, value in lost.items())
    flags = " ".join(f"--{name} {value}" for name, value in lost.items())
    return f" Its local part ({keep}) is not kept: pass {keep} ({flags} on the command line) to keep it."
