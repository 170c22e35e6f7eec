"""A whole fine-tuning run: optionally transfer the checkpoint's softmax attention into the new one, train with
the Accelerate loop (the whole model, or a LoRA adapter with ``--lora_r``), then write the Hub-ready folder
(model, tokenizer or image processor, results, model card) and push it when asked."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..conversion import check_found
from ..conversion.convert import size_tokenizer
from ..conversion.transfer import REPORT_FILE, TransferReport, load_teacher, transfer_attention
from ..hybrid_parts import mechanism_weights
from ..model_cards import CardContent, CardKind, card_license, card_writer
from ..window_options import with_window_settings
from .arguments import build_parser, check_against_model
from .checkpoints import resolve_checkpoint
from .lora import add_lora, is_peft_model, lora_settings
from .loop import Finetuner, TrainingOutcome, create_accelerator, seeded_generator
from .output_folder import RESULTS_FILE, prepare_output_folder
from .publishing import publish_folder, repository_name, save_model_folder

logger = logging.getLogger(__name__)

# Options of some scripts that a model card reports when they are set.
TASK_SETTINGS = ("max_length", "max_seq_length", "line_by_line", "mlm_probability", "new_mlm_head",
                 "train_head_only", "gradient_checkpointing")


def no_option_checks(args) -> None:
    """The options check of a script that refuses nothing beyond what every script refuses."""


@dataclass(frozen=True)
class Recipe:
    """What a modality's script is made of; :meth:`main` is the script."""

    description: str
    add_data_arguments: Callable  # (parser) -> None
    load_processor: Callable  # (model_name_or_path, processor_name) -> tokenizer or image processor
    prepare_data: Callable  # (args, processor) -> PreparedData
    load_model: Callable  # (args, LabelInfo) -> model
    card_kind: CardKind
    processor_option: str  # the option naming another tokenizer or image processor (e.g. "tokenizer_name")
    finetuner: type[Finetuner] = Finetuner  # the training loop: a subclass evaluates other tasks (e.g. masked LM)
    check_options: Callable = no_option_checks  # (args) -> None: refuse, before anything loads, what it can't honour

    def build_parser(self):
        """The script's ``argparse`` parser (the documentation's command-line reference reads it too)."""
        return build_parser(self.description, self.add_data_arguments)

    def parse_args(self, argv: list[str] | None = None):
        args = self.build_parser().parse_args(argv)
        args.attention_config = with_window_settings(args.attention_config, args.local_window, args.global_tokens)
        return args

    def main(self, argv: list[str] | None = None) -> TrainingOutcome:
        """Parse the options, prepare processor and data, load the model, train and publish; returns the outcome."""
        args = self.parse_args(argv)
        check_found(args.model_name_or_path)
        self.check_options(args)
        accelerator = create_accelerator(args)
        prepare_output_folder(args, accelerator)
        checkpoint = (resolve_checkpoint(args.resume_from_checkpoint, args.output_dir)
                      if args.resume_from_checkpoint else None)
        processor = self.load_processor(args.model_name_or_path, getattr(args, self.processor_option))
        with accelerator.main_process_first():
            data = self.prepare_data(args, processor)
        model = self.load_model(args, data.labels)
        check_against_model(args, model.config)
        fit_tokenizer(processor, model.config)
        transfer = attention_transfer(args, model, data, args.per_device_train_batch_size, accelerator.device,
                                      accelerator.is_main_process, resuming=checkpoint is not None)
        model = add_lora(args, model)
        return finetune(args, accelerator, model, data, processor, self.card_kind, transfer, checkpoint,
                        self.finetuner)


def fit_tokenizer(processor, config) -> None:
    """A tokenizer that truncates below the longest input the model takes (its positions extended, e.g. by
    ``run_mlm.py --max_length``) is sized to the model, as ``hf-effattn convert --max_length`` sizes it: the saved
    folder's ``tokenizer(..., truncation=True)`` then gives what the model takes. Image processors are left as
    they are."""
    length = getattr(processor, "model_max_length", None)
    if length is not None and length < config.attention_max_length:
        size_tokenizer(processor, config)


def attention_transfer(args, model, data, batch_size: int, device, main_process: bool,
                       resuming: bool) -> dict | None:
    """``--attention_transfer_steps`` of attention transfer on the training inputs (no labels); its report.

    Every process runs it, on ``device``, on the same batches (of ``batch_size``, in the order ``--seed``
    gives), so all start fine-tuning from the same weights. The report is saved in ``--output_dir`` at once; a
    ``resuming`` run takes the transferred weights from its checkpoint and the report from there, without
    transferring again.
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
        window_dropout=args.attention_transfer_window_dropout, data_description=f"the training inputs of {data.dataset_id}", progress=main_process,
    )
    if main_process:
        Path(args.output_dir).mkdir(parents=True, exist_ok=True)
        report.save(args.output_dir)
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


def finetune(args, accelerator, model, data, processor, kind: CardKind, transfer: dict | None = None,
             checkpoint: Path | None = None, finetuner_class: type[Finetuner] = Finetuner) -> TrainingOutcome:
    """Train ``model`` on ``data`` with ``finetuner_class`` (from ``checkpoint``, if given); when the run reaches its
    last step, publish the final folder. The trackers end last: ``accelerator.end_training()`` also ends the process
    group."""
    finetuner = finetuner_class(args, accelerator, model, data, processor)
    outcome = finetuner.train(checkpoint)
    if outcome.finished:
        publish(args, accelerator, finetuner.model, processor, data, outcome, kind, transfer)
    else:
        logger.info(f"Paused at step {outcome.state.completed_steps} of {outcome.max_steps} (--stop_after_steps): "
                    "continue with the same options and --resume_from_checkpoint latest.")
    if args.with_tracking:
        accelerator.end_training()
    return outcome


def hyperparameters(args, accelerator, outcome: TrainingOutcome) -> dict:
    """The training settings a model card reports."""
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
        base_model=args.model_name_or_path,
        dataset_id=data.dataset_id,
        dataset_config=data.dataset_config,
        results=outcome.final_metrics,
        hyperparameters={**hyperparameters(args, accelerator, outcome), **lora_settings(unwrapped)},
        best={"metric": data.metrics.main, "value": state.best_metric, "step": state.best_step},
        transfer=transfer,
        lora=is_peft_model(unwrapped),
        license=card_license(args.model_name_or_path, args.license),
        extension=getattr(args, "position_extension", None),  # set by a script that extends the model as it loads
        window_weights=mechanism_weights(unwrapped) or None,
    )


def publish(args, accelerator, model, processor, data, outcome: TrainingOutcome, kind: CardKind,
            transfer: dict | None = None) -> None:
    """Save the Hub-ready folder into ``--output_dir``, with its model card; upload it with ``--push_to_hub``."""
    save_model_folder(accelerator, model, processor, args.output_dir)
    if accelerator.is_main_process:
        content = card_content(args, accelerator, model, data, outcome, kind, transfer)
        results = {"eval": outcome.final_metrics, "best_metric": outcome.state.best_metric,
                   "best_step": outcome.state.best_step, "history": outcome.state.history}
        (Path(args.output_dir) / RESULTS_FILE).write_text(json.dumps(results, indent=2))
        publish_folder(args.output_dir, content.repo_id, card_writer(args.output_dir, content), push=args.push_to_hub,
                       token=args.hub_token, private=args.hub_private_repo)
    accelerator.wait_for_everyone()
