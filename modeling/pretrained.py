"""The base of every efficient-attention model: weight initialisation, loading other architectures'
checkpoints, and saving Hub-ready folders.

Loading (:meth:`EffAttnPreTrainedModel.from_pretrained`) accepts two kinds of checkpoint:

* one of this family's own (``effattn_roberta`` / ``effattn_vit``): loaded as saved. Asking for another
  ``attention_type`` or other ``attention_config`` raises, since the mechanism's weights were trained for the
  saved one, unless ``convert_attention=True`` asks for an explicit, logged conversion.
* a Transformers checkpoint of a source architecture (RoBERTa and BERT; ViT): its config is converted (plus
  ``attention_type`` and ``attention_config``), its weights renamed where names differ, every shared weight reused,
  the rest initialised. A family maps each source ``model_type`` to the regexes renaming its weights to ours
  (``EffAttnPreTrainedModel.checkpoint_key_mappings``) and to the config values it sets (``source_config_overrides``).

Transformers' own arguments mean what they mean there (``transformers_arguments.py``): ``dtype="auto"`` keeps the
saved dtype (a source's too), ``from_pretrained(None, config=config, state_dict=state_dict)`` builds the model from
weights in memory, and weights of other shapes raise a ``RuntimeError`` naming ``ignore_mismatched_sizes``.

Either way a larger input size than the checkpoint's may be asked for (``max_length=N`` for text,
``image_size=S`` for ViT, the config's ``size_argument``; or a ``config`` of that size): the model is loaded at
the checkpoint's size, then its positions, and the weights its mechanism sizes by the maximum length, are
extended (``position_extension``). A smaller size is refused.

A warning lists the parameters that are new (initialised), those of the checkpoint that were dropped, and those
that were extended (``load_report.py``). ``output_loading_info=True`` returns them too, the extension as
``info["position_extension"]`` (``None`` when there was none).

Everything that can be refused is refused from the checkpoint's ``config.json`` alone, before any weight is read:
:meth:`EffAttnPreTrainedModel.plan_load` is that pre-flight check (conversion runs it before it reads anything
else), :meth:`EffAttnPreTrainedModel.from_plan` the load it planned; ``from_pretrained`` is the two in turn.

Saving (:meth:`EffAttnPreTrainedModel.save_pretrained`) writes the weights under this model's own names and
a ``config.json`` whose ``auto_map`` names the config and every head of the family, next to the flat
remote-code files, so that any ``Auto*`` class loads the folder with ``trust_remote_code=True``
(:func:`register_auto_classes` sets a family's ``auto_classes``).
"""

from __future__ import annotations

from typing import Any, ClassVar

from transformers import AutoConfig, PreTrainedModel

from .attentions import EfficientAttention
from .configuration_effattn import saved_attention
from .extension_checks import check_fits_in_memory
from .load_checks import LoadPlan, check_block_period, check_same_attention, check_size_arguments, without_file_keys
from .load_report import log_loading_report, transformers_load_report_held_back
from .local_settings import LOCAL_PART_SETTINGS
from .position_extension import extend_positions
from .remote_code import write_remote_code
from .transformers_arguments import WEIGHT_KWARGS, MismatchedSizesError, checkpoint_config_dict

class EffAttnPreTrainedModel(PreTrainedModel):
    """Base of the text and vision models."""

    supports_gradient_checkpointing = True
    accepts_loss_kwargs = False  # a head's loss is a mean plus aux_loss: Trainer must not rescale it
    checkpoint_key_mappings: ClassVar[dict[str, dict[str, str]]] = {}
    source_config_overrides: ClassVar[dict[str, dict[str, Any]]] = {}
    auto_classes: ClassVar[dict[str, type[PreTrainedModel]]] = {}

    def _init_weights(self, module):
        """Transformers' init, then the mechanisms' own parameters."""
        super()._init_weights(module)
        if isinstance(module, EfficientAttention):
            module.reset_parameters(self.config.initializer_range)
        elif hasattr(module, "mechanism_logit"):
            module.reset_parameters()

    @classmethod
    def from_pretrained(
        cls,
        pretrained_model_name_or_path,
        *model_args,
        attention_type: str | None = None,
        attention_config: dict | None = None,
        convert_attention: bool = False,
        **kwargs,
    ):
        """Load a checkpoint of this family or of a source architecture (see the module docstring): the checks of
        :meth:`plan_load`, then :meth:`from_plan`.

        Args:
            attention_type: the mechanism to use (default: the checkpoint's own, or ``"sdpa"`` for a source
                architecture's checkpoint).
            attention_config: its settings (default: the checkpoint's own, or the paper defaults).
            convert_attention: allow a checkpoint of this family to be loaded with another mechanism or other
                settings: weights shared by both are reused, the others dropped or initialised, and listed.
            max_length (text) / image_size (ViT): extend the model to this input size, at least the checkpoint's
                (see the module docstring).
            config_dict: the checkpoint's ``config.json`` as a dict, when the caller has read it (it is not read
                again).
            kwargs: as for :meth:`transformers.PreTrainedModel.from_pretrained` (config values such as
                ``num_labels`` included).
        """
        plan = cls.plan_load(pretrained_model_name_or_path, attention_type, attention_config, convert_attention,
                             **kwargs)
        return cls.from_plan(plan, *model_args)

    @classmethod
    def plan_load(cls, pretrained_model_name_or_path, attention_type: str | None = None,
                  attention_config: dict | None = None, convert_attention: bool = False,
                  config_dict: dict | None = None, **kwargs) -> LoadPlan:
        """The pre-flight check of a load, from the checkpoint's ``config.json`` alone (read here unless given as
        ``config_dict``): ``ValueError`` for a checkpoint of another model type, a smaller input size than the
        checkpoint's, or another mechanism than the checkpoint's without ``convert_attention``; bad settings raise
        as the config checks them. Nothing else is read; :meth:`from_plan` loads what it returns. Arguments as for
        :meth:`from_pretrained`."""
        source = config_dict if config_dict is not None else checkpoint_config_dict(pretrained_model_name_or_path,
                                                                                    kwargs)
        source_type = source.get("model_type")
        own_type = cls.config_class.model_type
        if source_type != own_type and source_type not in cls.checkpoint_key_mappings:
            known = ", ".join([own_type, *cls.checkpoint_key_mappings])
            raise ValueError(
                f"{cls.__name__} loads checkpoints of model_type {known}; {pretrained_model_name_or_path} has "
                f"model_type {source_type!r}."
            )
        check_size_arguments(cls, kwargs)
        size = kwargs.pop(cls.config_class.size_argument, None)
        config = kwargs.pop("config", None)
        if config is not None and (attention_type is not None or attention_config is not None
                                   or kwargs.keys() & set(LOCAL_PART_SETTINGS)):
            raise ValueError("Pass attention_type/attention_config (and the local part's settings) either inside "
                             "`config` or as arguments, not both.")
        weights = {name: kwargs.pop(name) for name in WEIGHT_KWARGS if name in kwargs}  # for the load, not the config
        if config is None:  # built, and checked, at the size the model will take
            target, kwargs = cls.config_from_checkpoint(source, attention_type, attention_config, kwargs, size)
        else:
            target = config if size is None else config.resized(config.size_values(size))
        saved = target.resized({name: source[name] for name in target.size_fields if name in source}, check=False)
        kwargs.update(weights)
        check_fits_in_memory(cls, target, saved)
        target.check_extends(saved, pretrained_model_name_or_path)
        if source_type == own_type:  # copied positions of ours are checked once loaded (check_block_alignment)
            check_same_attention(source, target, pretrained_model_name_or_path, convert_attention)
        else:
            kwargs.setdefault("key_mapping", cls.checkpoint_key_mappings[source_type])
            if target.input_size != saved.input_size:
                check_block_period(target.local_block, cls.extension_period(saved))
        return LoadPlan(pretrained_model_name_or_path, source, saved, target, kwargs)

    @classmethod
    def from_plan(cls, plan: LoadPlan, *model_args):
        """Load the checkpoint as :meth:`plan_load` checked it: its weights at the checkpoint's input size, then
        extended to the planned one; the load report logged (see the module docstring)."""
        kwargs = dict(plan.kwargs)
        output_loading_info = kwargs.pop("output_loading_info", False)
        extended = plan.target.input_size != plan.saved.input_size
        try:
            with transformers_load_report_held_back():
                model, info = super().from_pretrained(
                    plan.path, *model_args, config=plan.saved, output_loading_info=True, **kwargs
                )
        except RuntimeError as error:
            if "ignore_mismatched_sizes" not in str(error):
                raise
            raise MismatchedSizesError(
                f"Some weights of {plan.path} have other shapes in this model, whose config "
                "(attention settings, num_labels, ...) differs from the checkpoint's; the load report above lists "
                "them. Pass ignore_mismatched_sizes=True (hf-effattn convert --ignore_mismatched_sizes) to "
                "initialise them anew."
            ) from error
        info["position_extension"] = None
        if extended:
            info["position_extension"] = {
                "argument": plan.target.size_argument, "from": plan.saved.input_size, "to": plan.target.input_size,
                "parameters": extend_positions(model, plan.target),
            }
        model.check_block_alignment(saved_attention(plan.source)[2].get("local_block"))
        log_loading_report(model, info, plan.path, plan.source.get("model_type"))
        return (model, info) if output_loading_info else model

    def position_period(self) -> int | None:
        """The period of positions copied by an extension and not trained since (see ``position_extension``), or
        None (the family's rule; None where positions are not copied)."""
        return None

    @classmethod
    def extension_period(cls, saved) -> int | None:
        """The period of the positions an extension of a source checkpoint (config ``saved``, its learned table)
        copies, or None where positions are not copied (the family's rule)."""
        return None

    def check_block_alignment(self, checkpoint_block: int | None = None) -> None:
        """Raise where aligned blocks (``local_block``) would not restart the copied positions; ``checkpoint_block``:
        the blocks the checkpoint itself read, if any (see :func:`check_block_period`)."""
        check_block_period(self.config.local_block, self.position_period(), checkpoint_block)

    def extend_position_embeddings(self, config) -> None:
        """Grow the position embeddings, in place, to the input size of ``config`` (the family's rule, see
        ``position_extension``); the model's other weights and its config are left to the caller."""
        raise NotImplementedError

    @classmethod
    def config_from_checkpoint(cls, source: dict, attention_type, attention_config, kwargs: dict, size=None):
        """Our config from a checkpoint's ``config.json`` dict at input size ``size`` (None: the checkpoint's), and
        the ``kwargs`` it did not use."""
        source_type = source.get("model_type")
        config_dict = without_file_keys(source)
        if source_type != cls.config_class.model_type:
            overrides = cls.source_config_overrides.get(source_type, {})
            config_dict = {**cls.source_defaults(source_type), **config_dict, **overrides}
        if size is not None:  # the checkpoint's own config gives the values of that size
            config_dict.update(cls.config_class.from_dict(config_dict).size_values(size))
        return cls.config_class.from_dict(
            config_dict, return_unused_kwargs=True, attention_type=attention_type, attention_config=attention_config,
            **kwargs,
        )

    @classmethod
    def source_defaults(cls, source_type: str) -> dict:
        """The defaults of a source architecture's config that differ from ours. A ``config.json`` may leave its
        class defaults out (Hub BERT checkpoints have no ``bos_token_id``/``eos_token_id``: ``None``), and ours
        (RoBERTa's 0 and 2) must not fill them in."""
        theirs, ours = AutoConfig.for_model(source_type).to_dict(), cls.config_class().to_dict()
        return {key: value for key, value in without_file_keys(theirs).items() if key in ours and ours[key] != value}

    def save_pretrained(self, save_directory, *args, save_original_format: bool = False, **kwargs):
        """As :meth:`transformers.PreTrainedModel.save_pretrained`, with ``config.auto_map`` naming every head
        of the family, the weights saved under this model's names (``save_original_format=False``): never
        renamed back to those of the checkpoint the model was converted from, and the remote code trimmed to the
        files this model runs (:meth:`write_remote_code`)."""
        self.config.auto_map = {
            "AutoConfig": qualified_name(type(self.config)),
            **{auto: qualified_name(model_class) for auto, model_class in self.auto_classes.items()},
        }
        result = super().save_pretrained(save_directory, *args, save_original_format=save_original_format, **kwargs)
        if kwargs.get("is_main_process", True):
            self.write_remote_code(save_directory)
        return result

    def write_remote_code(self, folder) -> list[str]:
        """Replace the modules that ``save_pretrained`` copied into ``folder`` with the two files of remote code
        generated for this model, ``configuration_effattn.py`` and its family's modeling file (:mod:`.remote_code`);
        returns their names."""
        return write_remote_code(self, folder)

    def _upload_modified_files(self, working_dir, *args, **kwargs):
        """``save_pretrained(..., push_to_hub=True)`` uploads the folder before it returns: its code generated first."""
        self.write_remote_code(working_dir)
        return super()._upload_modified_files(working_dir, *args, **kwargs)


def qualified_name(cls: type) -> str:
    """``file.ClassName``, as ``auto_map`` names a class of the flat remote-code folder."""
    return f"{cls.__module__.rsplit('.', 1)[-1]}.{cls.__name__}"


def register_auto_classes(family: type[EffAttnPreTrainedModel], auto_classes: dict[str, type]) -> None:
    """Register the family's config and models as ``Auto*`` remote code."""
    family.config_class.register_for_auto_class()
    for auto_class, model_class in auto_classes.items():
        model_class.register_for_auto_class(auto_class)
    family.auto_classes = dict(auto_classes)
