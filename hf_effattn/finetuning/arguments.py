"""Command-line options shared by the fine-tuning scripts: the model and its attention, LoRA, the training
loop (those of Transformers' ``run_glue_no_trainer.py``), checkpointing and publishing; and the files and folders
that the options name, which the output folder must keep clear of (:func:`run_inputs`)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..options.argument_types import hub_id, learning_rate, non_negative_float, non_negative_int, positive_int, share
from ..models.hybrid_parts import (
    MECHANISM_WEIGHT_LEARNING_RATE, check_local_part, check_window_dropout_of, first_attention,
)
from ..modeling.attentions import get_attention_class
from ..modeling.fast_paths import check_fast_paths_can_run, fast_path_devices, fast_path_mode
from ..folders.output_folders import Input
from ..options.user_errors import OneLineParser, refuse_options_without
from ..options.window_options import add_window_arguments, local_part_options

SCHEDULER_TYPES = ("linear", "cosine", "cosine_with_restarts", "polynomial", "constant", "constant_with_warmup")


class SettingsFile(dict):
    """Settings read from the JSON file ``path``: a file the run reads (:func:`run_inputs`)."""

    def __init__(self, settings: dict, path: str):
        super().__init__(settings)
        self.path = path


def attention_config_value(text: str) -> dict:
    """``--attention_config``: a JSON object, or the path of a JSON file holding one (a :class:`SettingsFile`)."""
    from_file = not text.lstrip().startswith("{") and Path(text).is_file()
    try:
        value = json.loads(Path(text).read_text() if from_file else text)
    except json.JSONDecodeError as error:
        raise argparse.ArgumentTypeError(f"--attention_config is not valid JSON ({error}): {text!r}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"--attention_config must be a JSON object, got {text!r}.")
    return SettingsFile(value, text) if from_file else value


def settle_model_options(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    """After parsing: options that would do nothing refused (:func:`check_dependent_options`), the local part's
    options checked against ``--attention_config`` (:func:`~hf_effattn.options.window_options.local_part_options`);
    ``args.attention_config_file``, the settings file ``--attention_config`` names (or None), kept as an input of the
    run."""
    check_dependent_options(args, parser)
    local_part_options(args)
    args.attention_config_file = getattr(args.attention_config, "path", None)


def checkpointing_value(text: str) -> int | str:
    """``--checkpointing_steps``: a positive number of optimizer steps, or ``epoch``."""
    if text == "epoch":
        return text
    if text.isdigit() and int(text) > 0:
        return int(text)
    raise argparse.ArgumentTypeError(f"--checkpointing_steps must be a positive integer or 'epoch', got {text!r}.")


PROCESSOR_HELP = {  # the option naming another tokenizer (text scripts) or image processor (the image script)
    "tokenizer_name": "The tokenizer to use (Hub id or folder); required with a preset. Default: the checkpoint's.",
    "image_processor_name": "The image processor to use. Default: the checkpoint's, else (and for a preset) a "
                            "ViTImageProcessor resizing to the model's image size.",
}
INPUT_OPTIONS = {  # option -> what it names: the files and folders a run reads
    "model_name_or_path": "model", "tokenizer_name": "tokenizer", "image_processor_name": "image processor",
    "dataset_name": "dataset", "train_file": "training data", "validation_file": "evaluation data",
    "resume_from_checkpoint": "checkpoint to resume from", "attention_config_file": "attention settings file",
}
OPTION_NAMES = {"attention_config_file": "attention_config"}  # an input's attribute -> the option that names it


def add_model_arguments(parser: argparse.ArgumentParser, processor_option: str) -> None:
    """The checkpoint to start from, its tokenizer or image processor (``processor_option``: the script's modality's
    only) and the attention mechanism to put in it."""
    group = parser.add_argument_group("model")
    group.add_argument("--model_name_or_path", required=True,
                       help="A RoBERTa/BERT/ViT checkpoint or one of hf_effattn's (Hub id or local folder), or a "
                            "preset to train from scratch (hf-effattn list --models), e.g. "
                            "vit-tiny-patch4-32/kerformer.")
    group.add_argument(f"--{processor_option}", default=None, help=PROCESSOR_HELP[processor_option])
    group.add_argument("--attention_type", default=None,
                       help="The attention mechanism (hf-effattn list); default: the checkpoint's own, else sdpa.")
    group.add_argument("--attention_config", type=attention_config_value, default=None,
                       help='The mechanism\'s settings as JSON (or a JSON file), e.g. \'{"se_mode": "channel"}\'.')
    add_window_arguments(group)
    group.add_argument("--convert_attention", action="store_true",
                       help="Allow an hf_effattn checkpoint to be loaded with another mechanism than its own.")
    group.add_argument("--ignore_mismatched_sizes", action="store_true",
                       help="Re-initialise weights whose shape differs, e.g. a classifier with another label count.")
    group.add_argument("--license", default=None, metavar="ID",
                       help="The model card's licence, a Hub licence id such as apache-2.0 (default: the one the "
                            "checkpoint's card states, else 'other' with a note).")
    group.add_argument("--base_model", type=hub_id, default=None, metavar="ID",
                       help="The checkpoint's Hub id, which the model card names and links as its base_model "
                            "(default: the checkpoint's when it is a Hub id, else the base_model its card declares).")
    group.add_argument("--attention_transfer_steps", type=non_negative_int, default=0,
                       help="Before fine-tuning, train the new attention for this many steps to reproduce the "
                            "checkpoint's softmax attention on the training inputs (no labels; default 0: none).")
    group.add_argument("--attention_transfer_learning_rate", type=learning_rate, default=3e-3)
    group.add_argument("--attention_transfer_train", choices=("mechanism", "attention", "attention_block"),
                       default="attention",
                       help="What the transfer trains: the mechanism's new parameters, also its query/key/value "
                            "projections (default), or also the output projection.")
    group.add_argument("--attention_transfer_window_dropout", type=share, default=0.0, metavar="P",
                       help="With --local_window or --local_block: the share of transfer steps on which the local "
                            "part is switched off (default 0).")
    group.add_argument("--attention_transfer_mechanism_weight_learning_rate", type=learning_rate,
                       default=MECHANISM_WEIGHT_LEARNING_RATE, metavar="LR",
                       help="With --local_window or --local_block: the learning rate of the gates in the transfer "
                            f"(default {MECHANISM_WEIGHT_LEARNING_RATE:g}).")
    group.add_argument("--window_dropout", type=share, default=0.0, metavar="P",
                       help="With a local window or blocks beside the mechanism: the share of training steps on which "
                            "the local part is switched off, so that the mechanism keeps carrying weight (default 0; "
                            "the draws depend on --seed and the step).")
    group.add_argument("--mechanism_weight_learning_rate", type=learning_rate, default=MECHANISM_WEIGHT_LEARNING_RATE,
                       metavar="LR",
                       help="Beside a local window or blocks: the learning rate of each layer's gate, the per-head "
                            "weight on the mechanism's part (no weight decay; default "
                            f"{MECHANISM_WEIGHT_LEARNING_RATE:g}: at the other weights' rate it stays where it "
                            "starts).")


def add_lora_arguments(parser: argparse.ArgumentParser) -> None:
    """LoRA with PEFT instead of full fine-tuning (:mod:`hf_effattn.finetuning.lora`)."""
    group = parser.add_argument_group("LoRA (PEFT)")
    group.add_argument("--lora_r", type=positive_int, default=None,
                       help="Train a LoRA adapter of this rank (plus the head and the attention's own parameters) "
                            "instead of the whole model; the output folder holds the adapter and its base.")
    group.add_argument("--lora_alpha", type=positive_int, default=16, help="LoRA's scaling numerator (default 16).")
    group.add_argument("--lora_dropout", type=share, default=0.1, help="Dropout on LoRA's input (default 0.1).")
    group.add_argument("--lora_target_modules", nargs="+", default=None, metavar="NAME",
                       help="The linear layers LoRA adapts, e.g. query value dense; default: the mechanism's "
                            "projections, query and value (value alone for psf, which has no query or key).")


def add_training_arguments(parser: argparse.ArgumentParser) -> None:
    """Optimisation, schedule, checkpointing and tracking options of the Accelerate loop."""
    group = parser.add_argument_group("training")
    group.add_argument("--per_device_train_batch_size", type=positive_int, default=8)
    group.add_argument("--per_device_eval_batch_size", type=positive_int, default=8)
    group.add_argument("--learning_rate", type=learning_rate, default=5e-5)
    group.add_argument("--weight_decay", type=non_negative_float, default=0.0)
    group.add_argument("--num_train_epochs", type=positive_int, default=3)
    group.add_argument("--max_train_steps", type=positive_int, default=None,
                       help="Total optimizer steps; overrides --num_train_epochs.")
    group.add_argument("--gradient_accumulation_steps", type=positive_int, default=1)
    group.add_argument("--lr_scheduler_type", choices=SCHEDULER_TYPES, default="linear")
    group.add_argument("--num_warmup_steps", type=non_negative_int, default=0)
    group.add_argument("--seed", type=int, default=42)
    group.add_argument("--dataloader_num_workers", type=non_negative_int, default=0,
                       help="Worker processes that load (and augment) batches; 0 loads in the training process.")
    group.add_argument("--output_dir", required=True, help="Where checkpoints and the final Hub-ready folder go.")
    group.add_argument("--overwrite_output_dir", action="store_true",
                       help="Replace a non-empty --output_dir (refused otherwise) whole with a new run, written "
                            "beside it and put in its place at the run's first checkpoint or final save; with "
                            "--resume_from_checkpoint, continue the finished run saved there.")
    group.add_argument("--checkpointing_steps", type=checkpointing_value, default=None,
                       help="Save the full training state every N optimizer steps, or at each 'epoch'.")
    group.add_argument("--resume_from_checkpoint", default=None,
                       help="A checkpoint folder to resume from, or 'latest' (the newest in --output_dir).")
    group.add_argument("--stop_after_steps", type=positive_int, default=None,
                       help="Save a checkpoint and stop at this optimizer step, as a pre-empted job would; "
                            "resume later with --resume_from_checkpoint latest (e.g. for time-limited jobs).")
    group.add_argument("--with_tracking", action="store_true", help="Log metrics to the --report_to trackers.")
    group.add_argument("--report_to", default="all",
                       help="Trackers for --with_tracking: tensorboard, wandb, comet_ml, clearml, ... or all.")


def add_hub_arguments(parser: argparse.ArgumentParser) -> None:
    """Publishing the final folder on the Hugging Face Hub."""
    group = parser.add_argument_group("hub")
    group.add_argument("--push_to_hub", action="store_true", help="Upload the final folder to the Hub.")
    group.add_argument("--hub_model_id", default=None, help="The repository (default: the output folder's name).")
    group.add_argument("--hub_token", default=None, help="A Hub token (default: the saved login or HF_TOKEN).")
    group.add_argument("--hub_private_repo", action="store_true", help="Create the repository as private.")


def build_parser(description: str, add_data_arguments, processor_option: str) -> argparse.ArgumentParser:
    """A script's parser: model (with ``--<processor_option>``), its data options (``add_data_arguments(parser)``),
    training and hub."""
    parser = OneLineParser(description=description)
    add_model_arguments(parser, processor_option)
    add_lora_arguments(parser)
    add_data_arguments(parser)
    add_training_arguments(parser)
    add_hub_arguments(parser)
    return parser


def check_against_model(args: argparse.Namespace, config) -> None:
    """Options that the model's config cannot honour, refused before anything loads: a ``--max_length`` beyond the
    longest input its position embeddings take (``config.attention_max_length``: for RoBERTa
    ``max_position_embeddings - pad_token_id - 1``, as positions start after the padding index), and a window
    dropout or the gates' learning rate without a window or blocks beside the mechanism
    (:func:`~hf_effattn.models.hybrid_parts.check_local_part`); then the fast-path mode
    (:func:`check_fast_path_mode`)."""
    max_length, limit = getattr(args, "max_length", None), getattr(config, "attention_max_length", None)
    if max_length and limit and max_length > limit:
        raise ValueError(f"--max_length {max_length} is longer than the {limit} tokens {args.model_name_or_path} "
                         f"takes (max_position_embeddings {config.max_position_embeddings}): use --max_length "
                         f"{limit} or less.")
    for option in ("window_dropout", "attention_transfer_window_dropout"):
        check_window_dropout_of(config, getattr(args, option), f"--{option}")
    for option in ("mechanism_weight_learning_rate", "attention_transfer_mechanism_weight_learning_rate"):
        rate = getattr(args, option, MECHANISM_WEIGHT_LEARNING_RATE)
        if rate != MECHANISM_WEIGHT_LEARNING_RATE:
            check_local_part(first_attention(config), f"--{option}", rate)
    check_fast_path_mode(config)


def check_fast_path_mode(config) -> None:
    """``HF_EFFATTN_FAST_PATHS`` read (a bad value refused), and in ``"fast"`` mode the run's device checked against
    the devices where the model's mechanism has a fast path
    (:func:`~hf_effattn.modeling.fast_paths.check_fast_paths_can_run`): refused before anything loads, not at the
    first step."""
    if fast_path_mode() != "fast":
        return
    from accelerate import PartialState

    devices = fast_path_devices(get_attention_class(config.attention_type))
    check_fast_paths_can_run(PartialState().device, devices)


DEPENDENT_OPTIONS = {  # an option -> the options that act only with it, what it runs, and how to give it
    "attention_transfer_steps": (("attention_transfer_learning_rate", "attention_transfer_train",
                                  "attention_transfer_window_dropout",
                                  "attention_transfer_mechanism_weight_learning_rate"), "an attention transfer",
                                 "--attention_transfer_steps N"),
    "lora_r": (("lora_alpha", "lora_dropout"), "a LoRA adapter", "--lora_r R"),  # --lora_target_modules: lora.py
}


def check_dependent_options(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    """Refuse options set to other than their defaults while the option they act with is not given
    (:data:`DEPENDENT_OPTIONS`): they would do nothing."""
    for needed, (options, purpose, how) in DEPENDENT_OPTIONS.items():
        given = [f"--{name}" for name in options if getattr(args, name) != parser.get_default(name)]
        if given and not getattr(args, needed):
            refuse_options_without(given, purpose, how)


def run_inputs(args: argparse.Namespace) -> list[Input]:
    """The files and folders that the run of ``args`` reads (:data:`INPUT_OPTIONS`), but for the run's own
    checkpoints, under ``--output_dir``, which it resumes from."""
    output = Path(args.output_dir).resolve()

    def own_checkpoint(value: str) -> bool:
        return value == "latest" or Path(value).resolve().is_relative_to(output)

    return [Input(what, f"--{OPTION_NAMES.get(option, option)}", getattr(args, option))
            for option, what in INPUT_OPTIONS.items()
            if getattr(args, option, None) and not (option == "resume_from_checkpoint"
                                                    and own_checkpoint(args.resume_from_checkpoint))]
