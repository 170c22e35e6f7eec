"""A whole fine-tuning run: optionally transfer the checkpoint's softmax attention into the new one, train with
the Accelerate loop (the whole model, or a LoRA adapter with ``--lora_r``), then write the Hub-ready folder
(model, tokenizer or image processor, a sentence-transformers checkpoint's modules, results, model card) and push it
when asked. A :class:`Recipe` is a script: :meth:`Recipe.main` takes its command line, :meth:`Recipe.train` the same
options as keyword arguments.

What a run refuses comes first, each check before anything it does not need: inputs named as local folders that
do not exist, the options against the model's config (:attr:`Recipe.check_options`: no weights or data loaded),
the device's mixed precision, the output folder against the run's inputs and what it holds
(:mod:`hf_effattn.folders.output_folders`), the settings of a checkpoint to resume, the tokenizer or image processor,
and the model, before the data wherever its head does not depend on the data's labels (``run_mlm.py``'s).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..conversion.convert import size_tokenizer
from ..conversion.transfer import REPORT_FILE, TransferReport, load_teacher, transfer_attention
from ..folders.hub_or_local import check_found
from ..models.hybrid_parts import has_hybrid_layers, mechanism_weights
from ..options.keyword_options import errors_raised, keyword_argv
from ..model_cards import CardContent, CardKind, card_base_model, card_license, card_writer, local_part_of
from ..folders.output_folders import RESULTS_FILE, OutputFolder, check_output_folder, restore_interrupted
from ..folders.sentence_transformers_folder import (
    copy_sentence_transformers_modules, sentence_embedding, warn_modules_not_carried,
)
from .arguments import build_parser, run_inputs, settle_model_options
from .checkpoints import check_resumable, read_state, remove_unfinished_saves, resolve_checkpoint
from .data import LabelInfo
from .fingerprint import settings_fingerprint
from .lora import add_lora, check_lora_arguments, is_peft_model, lora_settings
from .loop import Finetuner, TrainingOutcome, create_accelerator, seeded_generator
from .models import is_preset
from .publishing import publish_folder, repository_name, save_model_folder

logger = logging.getLogger(__name__)

# Options of some scripts that a model card reports when they are set.
TASK_SETTINGS = ("max_length", "max_seq_length", "line_by_line", "block_special_tokens", "shuffled_pieces",
                 "mlm_probability", "new_mlm_head", "train_head_only", "window_dropout", "gradient_checkpointing")
HUB_OR_LOCAL_OPTIONS = {"model_name_or_path": "Checkpoint", "tokenizer_name": "Tokenizer",
                        "image_processor_name": "Image processor", "dataset_name": "Dataset"}


@dataclass(frozen=True)
class Recipe:
    """What a modality's script is made of; :meth:`main` is the script."""

    description: str
    add_data_arguments: Callable  # (parser) -> None
    load_processor: Callable  # (model_name_or_path, processor_name) -> tokenizer or image processor
    prepare_data: Callable  # (args, processor, model config: None where the data comes first) -> PreparedData
    load_model: Callable  # (args, LabelInfo) -> model
    card_kind: CardKind
    processor_option: str  # the option naming another tokenizer or image processor (e.g. "tokenizer_name")
    check_options: Callable  # (args) -> None: refuse, before anything loads, what the model's config can't honour
    finetuner: type[Finetuner] = Finetuner  # the training loop: a subclass evaluates other tasks (e.g. masked LM)
    labels: LabelInfo | None = None  # the task's labels where the data does not give them: the model loads first
    saved_processor: Callable | None = None  # (args, processor, config) -> what the folder saves, if not the processor

    def build_parser(self):
        """The script's ``argparse`` parser (the documentation's command-line reference reads it too)."""
        return build_parser(self.description, self.add_data_arguments, self.processor_option)

    def parse_args(self, argv: list[str] | None = None, parser=None):
        """The options of ``argv`` (default: the command line), read by ``parser`` (default: the script's)."""
        parser = parser or self.build_parser()
        args = parser.parse_args(argv)
        settle_model_options(args, parser)
        return args

    def main(self, argv: list[str] | None = None) -> TrainingOutcome:
        """The script: the options ``argv`` (default: the command line), then :meth:`start`."""
        return self.start(self.parse_args(argv))

    def train(self, **options) -> TrainingOutcome:
        """The script as a library call: its options as keyword arguments, named as on the command line without the
        dashes (``train(model_name_or_path="roberta-base-dba", train_file="train.csv", max_train_steps=100,
        output_dir="out")``), checked as the command line checks them (a bad one raises ``ValueError``, an unknown
        one ``TypeError``); then :meth:`start`."""
        parser = self.build_parser()
        return self.start(self.parse_args(keyword_argv(parser, options), errors_raised(parser)))

    def start(self, args) -> TrainingOutcome:
        """Check the options, prepare the output folder, then :meth:`run`; returns the outcome. A run that fails
        before its output folder is in place leaves the folder as it was."""
        check_inputs_found(args)
        check_lora_arguments(args)
        self.check_options(args)
        announce_modules_not_carried(args)
        accelerator = create_accelerator(args)
        folder = prepare_output_folder(args, accelerator)
        project = accelerator.project_configuration  # trackers write where the run writes
        project.project_dir = project.logging_dir = str(folder.path)
        try:
            return self.run(args, accelerator, folder)
        except BaseException:
            folder.discard(accelerator.is_main_process)
            raise

    def run(self, args, accelerator, folder: OutputFolder) -> TrainingOutcome:
        """Prepare processor, model and data, train into ``folder`` and publish."""
        checkpoint = resumed_checkpoint(args, accelerator)
        processor = self.load_processor(args.model_name_or_path, getattr(args, self.processor_option))
        model = None if self.labels is None else self.load_model(args, self.labels)
        with accelerator.main_process_first():
            data = self.prepare_data(args, processor, None if model is None else model.config)
        if model is None:
            model = self.load_model(args, data.labels)
        fit_tokenizer(args, processor, model.config)
        if self.saved_processor is not None:
            processor = self.saved_processor(args, processor, model.config)
        transfer = attention_transfer(args, model, data, args.per_device_train_batch_size, accelerator.device,
                                      accelerator.is_main_process, resuming=checkpoint is not None,
                                      folder=folder.path)
        model = add_lora(args, model)
        return finetune(args, accelerator, model, data, processor, self.card_kind, folder, transfer, checkpoint,
                        self.finetuner)


def check_inputs_found(args) -> None:
    """A model, tokenizer, image processor or dataset that names a local folder that does not exist is refused
    (:func:`~hf_effattn.folders.hub_or_local.check_found`), not looked up on the Hub; presets are names."""
    for option, what in HUB_OR_LOCAL_OPTIONS.items():
        value = getattr(args, option, None)
        if value and not is_preset(value):
            check_found(value, what, hub_cache=option != "dataset_name")


def announce_modules_not_carried(args) -> None:
    """A LoRA run writes an adapter and its base, not a model that sentence-transformers loads: say so, before
    training, of a sentence-transformers checkpoint (the other runs keep its modules, :func:`copy_source_modules`)."""
    if args.lora_r is not None and not is_preset(args.model_name_or_path):
        warn_modules_not_carried(args.model_name_or_path, "--lora_r writes a LoRA adapter and its base (base_model/), "
                                 "which SentenceTransformer does not load; train without --lora_r to keep them.")


def copy_source_modules(args, model, folder) -> None:
    """The sentence-transformers modules of the checkpoint the run started from, if any, into ``folder`` (with
    ``max_seq_length`` following positions the run extended); none for a preset, nor for a LoRA adapter's folder
    (:func:`announce_modules_not_carried`)."""
    if is_preset(args.model_name_or_path) or is_peft_model(model):
        return
    extended = getattr(args, "position_extension", None)
    copy_sentence_transformers_modules(args.model_name_or_path, folder,
                                       model.config.attention_max_length if extended else None)


def prepare_output_folder(args, processes) -> OutputFolder:
    """Check ``--output_dir`` against the run's inputs and what it holds (:mod:`hf_effattn.folders.output_folders`),
    after putting right what a killed run left; return where the run writes (beside ``--output_dir`` when it replaces the
    folder). ``processes``: the run's ``Accelerator`` (or Accelerate's ``PartialState``); the main process writes."""
    if processes.is_main_process:
        restore_interrupted(args.output_dir)
    processes.wait_for_everyone()
    replaces = check_output_folder(args.output_dir, run_inputs(args), args.overwrite_output_dir,
                                   resuming=bool(args.resume_from_checkpoint))
    processes.wait_for_everyone()  # every process has seen the folder as it was
    if processes.is_main_process and not replaces:
        remove_unfinished_saves(args.output_dir)
    return OutputFolder.replacing(args.output_dir, replaces)


def resumed_checkpoint(args, accelerator) -> Path | None:
    """The checkpoint that ``--resume_from_checkpoint`` names (``None``: a new run), refused at once when the
    options show that this run would not continue it (the data's part of the check comes when training starts)."""
    if not args.resume_from_checkpoint:
        return None
    checkpoint = resolve_checkpoint(args.resume_from_checkpoint, args.output_dir)
    if checkpoint is not None:
        check_resumable(read_state(checkpoint), settings_fingerprint(args, accelerator), args.max_train_steps,
                        checkpoint, partial=True)
    return checkpoint


def fit_tokenizer(args, processor, config) -> None:
    """After the run extended the model's positions (``run_mlm.py --max_length``), a tokenizer that truncates below
    the model's new length is sized to it, as ``hf-effattn convert --max_length`` sizes it: the saved folder's
    ``tokenizer(..., truncation=True)`` then gives what the model takes. A tokenizer is otherwise left as it is (its
    length is a sentence-transformers folder's ``max_seq_length``), and so are image processors."""
    length = getattr(processor, "model_max_length", None)
    if getattr(args, "position_extension", None) and length is not None and length < config.attention_max_length:
        size_tokenizer(processor, config)


def attention_transfer(args, model, data, batch_size: int, device, main_process: bool,
                       resuming: bool, folder: Path | None = None) -> dict | None:
    """``--attention_transfer_steps`` of attention transfer on the training inputs (no labels); its report.

    Every process runs it, on ``device``, on the same batches (of ``batch_size``, in the order ``--seed``
    gives), so all start fine-tuning from the same weights. The report is saved at once in ``folder``, where the
    run writes (default ``--output_dir``); a ``resuming`` run takes the transferred weights from its checkpoint and
    the report from ``--output_dir``, without transferring again.
    """
    if not args.attention_transfer_steps:
        return None
    if resuming and (Path(args.output_dir) / REPORT_FILE).exists():
        return resumed_report(args.output_dir, model.config.attention_type)
    from torch.utils.data import DataLoader

    batches = DataLoader(data.train, batch_size=batch_size, shuffle=True, collate_fn=data.collate_fn,
                         generator=seeded_generator(args.seed))
    model.to(device)
    teacher = load_teacher(model, args.model_name_or_path).to(device)
    report = transfer_attention(
        model, teacher, batches, steps=args.attention_transfer_steps,
        learning_rate=args.attention_transfer_learning_rate, train=args.attention_transfer_train,
        window_dropout=args.attention_transfer_window_dropout,
        mechanism_weight_learning_rate=args.attention_transfer_mechanism_weight_learning_rate,
        data_description=f"the training inputs of {data.dataset_id}", progress=main_process,
    )
    if main_process:
        folder = Path(folder or args.output_dir)
        folder.mkdir(parents=True, exist_ok=True)
        report.save(folder)
        logger.info("\n" + report.format())
    return report.to_dict()


def resumed_report(output_dir, attention_type: str) -> dict:
    """The transfer report a resumed run takes from ``output_dir``, checked now rather than when the card is written
    at the end: ``ValueError`` when it is unreadable or reports a transfer into another mechanism."""
    report = TransferReport.read(output_dir)
    if report.attention_type != attention_type:
        raise ValueError(f"{Path(output_dir) / REPORT_FILE} reports a transfer into {report.attention_type!r} "
                         f"attention, but this run trains {attention_type!r}: resume with --attention_type "
                         f"{report.attention_type}, or start a new run (--overwrite_output_dir).")
    return report.to_dict()


def finetune(args, accelerator, model, data, processor, kind: CardKind, folder: OutputFolder,
             transfer: dict | None = None, checkpoint: Path | None = None,
             finetuner_class: type[Finetuner] = Finetuner) -> TrainingOutcome:
    """Train ``model`` on ``data`` with ``finetuner_class`` (from ``checkpoint``, if given) into ``folder``; when the
    run reaches its last step, publish the final folder. The trackers end last: ``accelerator.end_training()`` also
    ends the process group."""
    finetuner = finetuner_class(args, accelerator, model, data, processor, folder)
    outcome = finetuner.train(checkpoint)
    if outcome.finished:
        publish(args, accelerator, finetuner.model, processor, data, outcome, kind, folder, transfer)
    else:
        logger.info(f"Paused at step {outcome.state.completed_steps} of {outcome.max_steps} (--stop_after_steps): "
                    "continue with the same options and --resume_from_checkpoint latest.")
    if args.with_tracking:
        accelerator.end_training()
    return outcome


def hyperparameters(args, accelerator, outcome: TrainingOutcome, model) -> dict:
    """The training settings a model card reports: the data's layout and the window dropout where they were set,
    and the gates' own learning rate where ``model`` has gates."""
    settings = {
        "learning_rate": args.learning_rate,
        "weight_decay": args.weight_decay,
        "per_device_train_batch_size": args.per_device_train_batch_size,
        "total_train_batch_size": (args.per_device_train_batch_size * accelerator.num_processes
                                   * args.gradient_accumulation_steps),
        "gradient_accumulation_steps": args.gradient_accumulation_steps,
        "num_processes": accelerator.num_processes,
        "mixed_precision": accelerator.mixed_precision,
        "lr_scheduler_type": args.lr_scheduler_type,
        "num_warmup_steps": args.num_warmup_steps,
        "train_steps": outcome.max_steps,
        "seed": args.seed,
    }
    for name in TASK_SETTINGS:
        if getattr(args, name, None):
            settings[name] = getattr(args, name)
    if getattr(args, "attention_transfer_steps", 0):
        settings["attention_transfer_steps"] = args.attention_transfer_steps
    if has_hybrid_layers(model):
        settings["mechanism_weight_learning_rate"] = args.mechanism_weight_learning_rate
    return settings


def card_content(args, accelerator, model, data, outcome: TrainingOutcome, kind: CardKind,
                 transfer: dict | None = None) -> CardContent:
    """What the model card says about this run."""
    unwrapped = accelerator.unwrap_model(model)
    config, state = unwrapped.config, outcome.state
    return CardContent(
        kind=kind,
        repo_id=repository_name(args.hub_model_id, args.output_dir),
        attention_type=config.attention_type,
        attention_config=config.attention_config,
        local_part=local_part_of(config),
        base_model=args.model_name_or_path,
        dataset_id=data.dataset_id,
        dataset_config=data.dataset_config,
        results=outcome.final_metrics,
        hyperparameters={**hyperparameters(args, accelerator, outcome, unwrapped), **lora_settings(unwrapped)},
        best={"metric": data.metrics.main, "value": state.best_metric, "step": state.best_step},
        transfer=transfer,
        lora=is_peft_model(unwrapped),
        license=card_license(args.model_name_or_path, args.license),
        extension=getattr(args, "position_extension", None),  # set by a script that extends the model as it loads
        window_weights=mechanism_weights(unwrapped) or None,
        base_model_id=card_base_model(args.model_name_or_path, args.base_model),
        sentence_embedding=sentence_embedding(args.output_dir),
    )


def publish(args, accelerator, model, processor, data, outcome: TrainingOutcome, kind: CardKind,
            folder: OutputFolder, transfer: dict | None = None) -> None:
    """Save the Hub-ready folder into ``folder`` (put in place of ``--output_dir`` if it is not yet), with its model
    card, written last (a folder with the final model but no card is a final save that was interrupted); upload it
    with ``--push_to_hub``."""
    save_model_folder(accelerator, model, processor, folder.path, final_folder=folder.final)
    if accelerator.is_main_process:
        copy_source_modules(args, accelerator.unwrap_model(model), folder.path)
        results = {"eval": outcome.final_metrics, "best_metric": outcome.state.best_metric,
                   "best_step": outcome.state.best_step, "history": outcome.state.history}
        (folder.path / RESULTS_FILE).write_text(json.dumps(results, indent=2))
    folder.commit(accelerator.is_main_process)
    if accelerator.is_main_process:
        content = card_content(args, accelerator, model, data, outcome, kind, transfer)
        publish_folder(args.output_dir, content.repo_id, card_writer(args.output_dir, content), push=args.push_to_hub,
                       token=args.hub_token, private=args.hub_private_repo)
    accelerator.wait_for_everyone()
