"""Text classification with ``transformers.Trainer``: what ``finetune/run_trainer.py`` runs, and the same without a
clone of the repository (``python -m hf_effattn.finetuning.text_classification_trainer``); from Python, :func:`main`
(a command line) or :func:`train` (the options as keyword arguments).

The same data options as ``run_text_classification.py`` (GLUE, IMDB, Amazon polarity, local files) and the
model options (``--attention_type``, ``--attention_config``, ``--attention_transfer_steps``), plus every
``TrainingArguments`` option::

    python finetune/run_trainer.py --model_name_or_path FacebookAI/roberta-base --attention_type kerformer \\
        --task_name sst2 --output_dir outputs/roberta-kerformer-sst2-trainer --eval_strategy epoch

The heads set ``accepts_loss_kwargs = False`` (their loss is a mean, plus the mechanisms' auxiliary loss),
so Trainer scales the loss correctly under gradient accumulation. The output folder is Hub-ready, with the
model card of ``model_cards/template.md`` (and a sentence-transformers checkpoint's modules). With ``--lora_r`` (and
``--lora_alpha``, ``--lora_dropout``, ``--lora_target_modules``) a LoRA adapter trains instead of the whole model,
and the folder holds the adapter and its base (:mod:`hf_effattn.finetuning.lora`); ``--push_to_hub`` uploads it with
hf_effattn's publisher (and not Trainer's, which would replace the card): only the Hub-ready files, never Trainer's
``checkpoint-*`` folders or pickles (``publishing.HUB_IGNORE_PATTERNS``), and the card names the repository as the
Hub does. The output folder follows the rule of the other scripts (:mod:`hf_effattn.folders.output_folders`): never
one of the run's inputs, and a folder that holds files replaced whole, at the run's first checkpoint or its end, with
``--overwrite_output_dir``. ``--resume_from_checkpoint latest`` continues from the newest ``checkpoint-*`` in
``--output_dir``, as in the other scripts.
"""

from __future__ import annotations

import dataclasses
import json
from contextlib import ExitStack
from pathlib import Path

import numpy as np
from transformers import HfArgumentParser, Trainer, TrainerCallback, TrainingArguments
from transformers.trainer_utils import get_last_checkpoint

from ..options.argument_types import MAX_LEARNING_RATE
from ..models.hybrid_parts import (
    WindowDropout, check_mechanism_weights, has_hybrid_layers, mechanism_weights, only_part,
    with_mechanism_weight_group,
)
from ..options.keyword_options import errors_raised, keyword_argv
from ..model_cards import (
    TEXT_CLASSIFICATION, CardContent, card_base_model, card_license, card_writer, local_part_of,
)
from ..folders.output_folders import OutputFolder
from ..folders.sentence_transformers_folder import sentence_embedding
from ..options.user_errors import command_name, run_script
from .arguments import add_lora_arguments, add_model_arguments, check_against_model, settle_model_options
from .fingerprint import fingerprint_differences, model_shape
from .lora import add_lora, check_lora_arguments, is_peft_model, lora_settings, save_adapter_folder
from .loop import check_mixed_precision
from .models import classifier_config, load_text_classifier, load_tokenizer
from .publishing import publish_folder, repository_name
from .run import (
    announce_modules_not_carried, attention_transfer, check_inputs_found, copy_source_modules, prepare_output_folder,
)
from .text_data import add_text_data_arguments, prepare_text_data

HYPERPARAMETERS = ("learning_rate", "weight_decay", "per_device_train_batch_size", "gradient_accumulation_steps",
                   "num_train_epochs", "max_steps", "lr_scheduler_type", "warmup_steps", "seed")


def build_parser() -> HfArgumentParser:
    """Every ``TrainingArguments`` option, the model, LoRA and data options, and ``--overwrite_output_dir``."""
    parser = HfArgumentParser(TrainingArguments, prog=command_name())
    add_model_arguments(parser, "tokenizer_name")
    add_lora_arguments(parser)
    add_text_data_arguments(parser)
    parser.add_argument("--overwrite_output_dir", action="store_true",
                        help="Replace a non-empty --output_dir (refused otherwise) whole with a new run, written "
                             "beside it and put in its place at its first checkpoint or its end (TrainingArguments "
                             "no longer has this option).")
    return parser


def parse_args(argv: list[str] | None = None, parser: HfArgumentParser | None = None
               ) -> tuple[TrainingArguments, object]:
    """``TrainingArguments`` and the model and data options of ``argv`` (default: the command line), read by
    ``parser`` (default: :func:`build_parser`'s)."""
    parser = parser or build_parser()
    training_args, options = parser.parse_args_into_dataclasses(argv)
    check_training_arguments(training_args)
    options.seed, options.output_dir = training_args.seed, training_args.output_dir
    settle_model_options(options, parser)
    options.resume_from_checkpoint = training_args.resume_from_checkpoint
    return training_args, options


def check_training_arguments(training_args: TrainingArguments) -> None:
    """Counts, learning rates and weight decays that ``TrainingArguments`` accepts but no run can train with (the other
    scripts' ranges, :mod:`hf_effattn.options.argument_types`), and fp16 on a CPU, refused before anything loads."""
    for name in ("gradient_accumulation_steps", "per_device_train_batch_size", "per_device_eval_batch_size"):
        if getattr(training_args, name) < 1:
            raise ValueError(f"--{name} {getattr(training_args, name)}: it must be at least 1.")
    if not 0 < training_args.learning_rate <= MAX_LEARNING_RATE:
        raise ValueError(f"--learning_rate {training_args.learning_rate:g}: expected a learning rate in (0, "
                         f"{MAX_LEARNING_RATE:g}].")
    if training_args.weight_decay < 0:
        raise ValueError(f"--weight_decay {training_args.weight_decay:g}: expected a number >= 0.")
    check_mixed_precision(training_args.mixed_precision, training_args.device)
    if training_args.max_steps <= 0 and training_args.num_train_epochs <= 0:
        raise ValueError(f"--num_train_epochs {training_args.num_train_epochs:g} trains nothing: give a positive "
                         "number of epochs, or --max_steps.")


def metric_function(metrics):
    """Trainer's ``compute_metrics``: the task's metrics from logits and labels."""

    def compute(prediction) -> dict[str, float]:
        logits, labels = prediction
        predicted = logits.squeeze(-1) if metrics.is_regression else np.argmax(logits, axis=-1)
        return metrics.compute(predicted, labels)

    return compute


def evaluate_splits(trainer, data) -> dict[str, dict[str, float]]:
    """The task's metrics on every evaluation split (MNLI: matched and mismatched)."""
    results = {}
    for split, dataset in data.evaluation.items():
        metrics = trainer.evaluate(dataset, metric_key_prefix=split)
        results[split] = {name: metrics[f"{split}_{name}"] for name in (*data.metrics.names, "combined_score")
                          if f"{split}_{name}" in metrics}
    return results


def plain(value):
    """An option's value as the card shows it (an enum by its value)."""
    return getattr(value, "value", value)


def card_content(training_args, options, model, data, results, transfer: dict | None = None) -> CardContent:
    """What the model card says about this Trainer run."""
    return CardContent(
        kind=TEXT_CLASSIFICATION,
        repo_id=repository_name(training_args.hub_model_id, training_args.output_dir),
        attention_type=model.config.attention_type,
        attention_config=model.config.attention_config,
        local_part=local_part_of(model.config),
        base_model=options.model_name_or_path,
        dataset_id=data.dataset_id,
        dataset_config=data.dataset_config,
        results=results,
        hyperparameters={**{name: plain(getattr(training_args, name)) for name in HYPERPARAMETERS},
                         "attention_transfer_steps": options.attention_transfer_steps,
                         **({"mechanism_weight_learning_rate": options.mechanism_weight_learning_rate}
                            if has_hybrid_layers(model) else {}),
                         "trainer": "transformers.Trainer", **lora_settings(model)},
        transfer=transfer,
        lora=is_peft_model(model),
        license=card_license(options.model_name_or_path, options.license),
        window_weights=mechanism_weights(model) or None,
        base_model_id=card_base_model(options.model_name_or_path, options.base_model),
        sentence_embedding=sentence_embedding(training_args.output_dir),
    )


class InPlaceAtFirstSave(TrainerCallback):
    """Puts a run that replaces its output folder in place at its first checkpoint; Trainer writes there after."""

    def __init__(self, folder: OutputFolder):
        self.folder = folder

    def on_save(self, args, state, control, **kwargs):
        self.folder.commit(state.is_world_process_zero)
        args.output_dir = str(self.folder.path)


class WindowDropoutEachStep(TrainerCallback):
    """``--window_dropout`` under Trainer: on the optimizer steps that
    :class:`~hf_effattn.models.hybrid_parts.WindowDropout` draws (from ``--seed`` and the step), the hybrid layers run
    the mechanism alone; after every step a mechanism weight that stopped being a number stops the run, naming the
    step."""

    def __init__(self, model, rate: float, seed: int):
        self.model, self.dropout, self.part = model, WindowDropout(rate, seed), ExitStack()

    def on_step_begin(self, args, state, control, **kwargs):
        self.part.enter_context(only_part(self.model, self.dropout.part(state.global_step)))

    def on_step_end(self, args, state, control, **kwargs):
        self.part.close()
        check_mechanism_weights(self.model, "lower --learning_rate", state.global_step)


class GatesOwnGroupTrainer(Trainer):
    """Trainer whose optimizer holds the hybrid layers' gates in a group of their own, as the other scripts' loop
    does (:func:`~hf_effattn.models.hybrid_parts.with_mechanism_weight_group`, ``--mechanism_weight_learning_rate``)."""

    def __init__(self, *args, mechanism_weight_learning_rate: float, **kwargs):
        super().__init__(*args, **kwargs)
        self.mechanism_weight_learning_rate = mechanism_weight_learning_rate

    def create_optimizer(self, model=None):
        optimizer = super().create_optimizer(model)
        groups = with_mechanism_weight_group(optimizer.param_groups, self.model, self.mechanism_weight_learning_rate)
        if len(groups) != len(optimizer.param_groups):  # the gates left their groups for their own
            optimizer.param_groups = []
            for group in groups:
                optimizer.add_param_group(group)
        return optimizer


def check_trainer_resume(checkpoint: str | None, config) -> None:
    """Refuse, before anything loads, a ``--resume_from_checkpoint`` folder whose model was saved with other shapes or
    another attention (mechanism, window or any other setting) than the ``config`` this run builds."""
    saved_file = Path(checkpoint or "") / "config.json"
    if not checkpoint or not saved_file.is_file():
        return
    saved = type(config).from_dict(json.loads(saved_file.read_text()))  # its defaults filled in, as this run's are
    differences = fingerprint_differences(model_shape(saved.to_dict()), model_shape(config.to_dict()))
    if differences:
        raise ValueError(f"Cannot resume from {checkpoint}: its model was saved with other settings than this run "
                         f"builds: {'; '.join(differences)}. Resume with that run's model and attention options "
                         "(--attention_type, --attention_config, the window options), or start a new run.")


def main(argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    """The script: the options ``argv`` (default: the command line), then :func:`start`; returns the metrics."""
    return start(*parse_args(argv))


def train(**options) -> dict[str, dict[str, float]]:
    """The script as a library call: its options (``TrainingArguments``' among them) as keyword arguments, named as on
    the command line without the dashes (``train(model_name_or_path="roberta-base-dba", task_name="sst2",
    output_dir="out", max_steps=100)``), checked as the command line checks them (a bad one raises ``ValueError``, an
    unknown one ``TypeError``); then :func:`start`. Returns the metrics."""
    parser = build_parser()
    return start(*parse_args(keyword_argv(parser, options), errors_raised(parser)))


def start(training_args: TrainingArguments, options) -> dict[str, dict[str, float]]:
    """Check the options and the output folder, then :func:`train_with_trainer`; returns the metrics. A run that
    fails before its output folder is in place leaves the folder as it was."""
    from accelerate import PartialState

    check_inputs_found(options)
    check_lora_arguments(options)
    config = classifier_config(options, "text")
    check_against_model(options, config)
    resumed = training_args.resume_from_checkpoint
    check_trainer_resume(get_last_checkpoint(training_args.output_dir) if resumed == "latest" else resumed, config)
    announce_modules_not_carried(options)
    folder = prepare_output_folder(options, PartialState())
    try:
        return train_with_trainer(training_args, options, folder)
    except BaseException:
        folder.discard(training_args.process_index == 0)
        raise


def train_with_trainer(training_args: TrainingArguments, options, folder: OutputFolder
                       ) -> dict[str, dict[str, float]]:
    """Train with Trainer into ``folder``, evaluate every split, save the Hub-ready folder, push it if asked."""
    tokenizer = load_tokenizer(options.model_name_or_path, options.tokenizer_name)
    with training_args.main_process_first(desc="dataset preparation"):
        data = prepare_text_data(options, tokenizer)
    model = load_text_classifier(options, data.labels)
    main_process = training_args.process_index == 0
    transfer = attention_transfer(options, model, data, training_args.per_device_train_batch_size,
                                  training_args.device, main_process,
                                  resuming=bool(training_args.resume_from_checkpoint), folder=folder.path)
    model = add_lora(options, model)
    trainer = GatesOwnGroupTrainer(
        model=model, args=dataclasses.replace(training_args, push_to_hub=False, output_dir=str(folder.path)),
        train_dataset=data.train, eval_dataset=next(iter(data.evaluation.values())), data_collator=data.collate_fn,
        processing_class=tokenizer, compute_metrics=metric_function(data.metrics),
        callbacks=[InPlaceAtFirstSave(folder),
                   WindowDropoutEachStep(model, options.window_dropout, training_args.seed)],
        mechanism_weight_learning_rate=options.mechanism_weight_learning_rate,
    )
    resumed = training_args.resume_from_checkpoint
    trainer.train(resume_from_checkpoint=True if resumed == "latest" else resumed)  # latest: the newest checkpoint-*
    results = evaluate_splits(trainer, data)
    trainer.save_model()
    if is_peft_model(model):  # the adapter again, naming its base, saved beside it
        save_adapter_folder(model, folder.path, is_main_process=main_process, final_folder=folder.final)
    elif main_process:
        copy_source_modules(options, model, folder.path)
    folder.commit(main_process)
    if main_process:
        content = card_content(training_args, options, model, data, results, transfer)
        publish_folder(training_args.output_dir, content.repo_id, card_writer(training_args.output_dir, content),
                       push=training_args.push_to_hub, token=training_args.hub_token,
                       private=bool(training_args.hub_private_repo))
    return results


if __name__ == "__main__":
    run_script(main)
