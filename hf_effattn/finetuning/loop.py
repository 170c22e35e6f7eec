"""The Accelerate training loop shared by the fine-tuning scripts and the demo.

One loop for text and images, on one device or many (``accelerate launch``): AdamW with weight decay
off for biases and norms, a Transformers learning-rate schedule, gradient accumulation, evaluation at
each epoch's end on every evaluation split, the best model kept by the task's main metric,
checkpoints every N steps or each epoch, and exact resumption.

Exact resumption rests on three choices: the training sampler is Accelerate's seedable sampler (each
epoch's order depends only on the seed and the epoch), every data loader draws from its own generator
(never from the global one that dropout uses, whose state the checkpoint restores; so evaluation settings
do not change training either), and a resumed run skips the batches already seen with
``accelerator.skip_first_batches``. A step checkpoint that falls
on an epoch's last step is saved after that epoch's evaluation, so that resuming never repeats or
misses an evaluation; a checkpoint also holds the loss summed over the epoch so far, so that a resumed
epoch's ``train_loss`` is the whole epoch's.

A loss that is not finite stops the run at once, before the step that would spread it to the weights, with a
message that names the likely cause: nothing saved after the last good checkpoint is written.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from pathlib import Path

import torch

from ..models.hybrid_parts import (
    WindowDropout, check_mechanism_weights, check_window_dropout, only_part, with_mechanism_weight_group,
)
from ..folders.output_folders import OutputFolder
from ..options.user_errors import TrainingDiverged
from .checkpoints import (
    BEST_DIR,
    TrainingState,
    check_resumable,
    checkpoint_root,
    read_state,
    replace_folder,
    save_checkpoint,
)
from .data import PreparedData
from .fingerprint import run_fingerprint
from .publishing import save_model_folder

logger = logging.getLogger(__name__)

TRACKER_PROJECT = "hf_effattn_finetune"  # trackers that write files put them in <output_dir>/<this>
NO_DECAY = ("bias", "LayerNorm.weight", "layernorm.weight", "layer_norm.weight", "norm.weight")


def create_accelerator(args):
    """The ``Accelerator`` of a run (seedable sampler, gradient accumulation, trackers), seeded; its mixed precision
    checked (:func:`check_mixed_precision`)."""
    from accelerate import Accelerator
    from accelerate.utils import DataLoaderConfiguration, set_seed

    accelerator = Accelerator(
        gradient_accumulation_steps=args.gradient_accumulation_steps,
        log_with=args.report_to if args.with_tracking else None,
        project_dir=args.output_dir,
        dataloader_config=DataLoaderConfiguration(use_seedable_sampler=True),
    )
    check_mixed_precision(accelerator.mixed_precision, accelerator.device)
    setup_logging(accelerator)
    set_seed(args.seed)
    return accelerator


def check_mixed_precision(precision: str, device) -> None:
    """Refuse fp16 on a CPU: Accelerate accepts it and trains in float32 while the run reports fp16 (it refuses the
    other precisions that a device cannot run itself)."""
    if precision == "fp16" and torch.device(device).type == "cpu":
        raise ValueError("Mixed precision fp16 (accelerate launch --mixed_precision, ACCELERATE_MIXED_PRECISION, or "
                         "run_trainer.py --fp16) does not run on a CPU: Accelerate would train in float32 while the "
                         "run reports fp16. Use bf16 (--mixed_precision bf16, --bf16) or no mixed precision.")


def setup_logging(accelerator) -> None:
    """Log at INFO on the main process, errors only on the others."""
    import datasets
    import transformers

    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S",
                        level=logging.INFO if accelerator.is_main_process else logging.ERROR)
    if not accelerator.is_local_main_process:
        datasets.utils.logging.set_verbosity_error()
        transformers.utils.logging.set_verbosity_error()


def parameter_groups(model, weight_decay: float, mechanism_weight_learning_rate: float | None) -> list[dict]:
    """AdamW parameter groups: weight decay on everything but biases and normalisation weights; the hybrid layers'
    gates in a group of their own, at ``mechanism_weight_learning_rate`` and without weight decay
    (:func:`~hf_effattn.models.hybrid_parts.with_mechanism_weight_group`)."""
    decayed, plain = [], []
    for name, parameter in model.named_parameters():
        if parameter.requires_grad:
            (plain if name.endswith(NO_DECAY) else decayed).append(parameter)
    groups = [{"params": decayed, "weight_decay": weight_decay}, {"params": plain, "weight_decay": 0.0}]
    return with_mechanism_weight_group(groups, model, mechanism_weight_learning_rate)


def seeded_generator(seed: int) -> torch.Generator:
    """A generator of its own for a data loader, so that iterating never draws from the global one."""
    return torch.Generator().manual_seed(seed)


def data_loaders(args, data: PreparedData) -> list:
    """The shuffled training loader, then one loader per evaluation split, each with its own generator."""
    from torch.utils.data import DataLoader

    common = {"collate_fn": data.collate_fn, "num_workers": args.dataloader_num_workers}
    train = DataLoader(data.train, shuffle=True, batch_size=args.per_device_train_batch_size,
                       generator=seeded_generator(args.seed), **common)
    return [train] + [DataLoader(split, batch_size=args.per_device_eval_batch_size,
                                 generator=seeded_generator(args.seed), **common)
                      for split in data.evaluation.values()]


@dataclass
class TrainingOutcome:
    """How a run ended: its state (history, best result) and whether it reached its last step."""

    state: TrainingState
    finished: bool
    max_steps: int

    @property
    def final_metrics(self) -> dict[str, dict[str, float]]:
        return self.state.latest_eval


class Finetuner:
    """One fine-tuning run: build with the prepared model and data and the run's ``folder`` (where it writes, and
    puts in place at its first checkpoint), then call :meth:`train`."""

    def __init__(self, args, accelerator, model, data: PreparedData, processor, folder: OutputFolder):
        from transformers import get_scheduler

        self.args, self.accelerator, self.data, self.processor, self.folder = args, accelerator, data, processor, folder
        optimizer = torch.optim.AdamW(parameter_groups(model, args.weight_decay, args.mechanism_weight_learning_rate),
                                      lr=args.learning_rate)
        self.model, self.optimizer, self.train_loader, *eval_loaders = accelerator.prepare(
            model, optimizer, *data_loaders(args, data))
        self.eval_loaders = dict(zip(data.evaluation, eval_loaders))
        self.steps_per_epoch = math.ceil(len(self.train_loader) / args.gradient_accumulation_steps)
        self.max_steps = args.max_train_steps or args.num_train_epochs * self.steps_per_epoch
        self.num_epochs = math.ceil(self.max_steps / self.steps_per_epoch)
        # A prepared scheduler steps once per process at each optimizer step: scale its lengths to match.
        self.scheduler = accelerator.prepare(get_scheduler(
            args.lr_scheduler_type, optimizer,
            num_warmup_steps=args.num_warmup_steps * accelerator.num_processes,
            num_training_steps=self.max_steps * accelerator.num_processes,
        ))
        check_window_dropout(model, args.window_dropout, "--window_dropout")
        self.window_dropout = WindowDropout(args.window_dropout, args.seed)
        fingerprint = run_fingerprint(args, accelerator, self.model, data, self.steps_per_epoch, self.max_steps)
        self.state = TrainingState(fingerprint=fingerprint)
        self.epoch_loss, self.epoch_batches = torch.zeros((), device=accelerator.device), 0
        self.progress = None

    # -- the run -------------------------------------------------------------------------------------------

    def train(self, checkpoint: Path | None = None) -> TrainingOutcome:
        """Train (from ``checkpoint``, if given) to the last step or to ``--stop_after_steps``; evaluate each epoch.
        Log lines go through tqdm meanwhile, so that they never break into the progress bar. Trackers stay open:
        ``accelerator.end_training()`` (which also ends the process group) comes after the final save."""
        from tqdm.auto import tqdm
        from tqdm.contrib.logging import logging_redirect_tqdm

        if checkpoint is not None:
            self.resume(checkpoint)
            self.epoch_loss.fill_(self.state.epoch_loss_sum)
            self.epoch_batches = self.state.epoch_batches
        if self.args.with_tracking:
            self.accelerator.init_trackers(TRACKER_PROJECT, tracker_config(self.args))
        self.log_plan()
        with logging_redirect_tqdm(loggers=[logging.getLogger(), logging.getLogger("transformers")]):
            self.progress = tqdm(total=self.max_steps, initial=self.state.completed_steps, desc="Training",
                                 disable=not self.accelerator.is_local_main_process)
            finished = self.run_epochs()
            self.progress.close()
        return TrainingOutcome(self.state, finished, self.max_steps)

    def run_epochs(self) -> bool:
        """The epoch loop; ``False`` when the run paused at ``--stop_after_steps`` (a checkpoint is saved)."""
        for epoch in range(self.state.completed_steps // self.steps_per_epoch, self.num_epochs):
            if self.state.completed_steps >= self.max_steps:
                break
            train_loss = self.train_epoch(epoch)
            if train_loss is None:
                self.save_checkpoint(f"step_{self.state.completed_steps}")
                return False
            self.record_evaluation(epoch, train_loss, self.evaluate())
            if self.args.checkpointing_steps == "epoch":
                self.save_checkpoint(f"epoch_{epoch}")
            elif self.step_checkpoint_due() or self.pause_due():
                self.save_checkpoint(f"step_{self.state.completed_steps}")
            if self.pause_due() and self.state.completed_steps < self.max_steps:
                return False
        return True

    def train_epoch(self, epoch: int) -> float | None:
        """Train one epoch (from where a resumed run stopped); its mean loss, or ``None`` on a mid-epoch pause."""
        loader = self.epoch_loader(epoch)
        self.model.train()
        for batch in loader:
            with self.accelerator.accumulate(self.model), only_part(self.model, self.window_dropout.part(
                    self.state.completed_steps)):
                loss = self.training_loss(batch)
                if not torch.isfinite(loss):
                    raise TrainingDiverged(self.non_finite_loss(loss.item(), batch))
                self.accelerator.backward(loss)
                self.optimizer.step()
                self.scheduler.step()
                self.optimizer.zero_grad()
            if self.accelerator.sync_gradients:
                check_mechanism_weights(self.model, "lower --learning_rate", self.state.completed_steps + 1)
            self.epoch_loss += loss.detach().float()
            self.epoch_batches += 1
            if not self.accelerator.sync_gradients:
                continue
            self.state.completed_steps += 1
            self.progress.update(1)
            if self.state.completed_steps >= self.max_steps or self.accelerator.gradient_state.end_of_dataloader:
                break
            if self.pause_due():
                return None
            if self.step_checkpoint_due():
                self.save_checkpoint(f"step_{self.state.completed_steps}")
        return (self.epoch_loss / max(self.epoch_batches, 1)).item()

    def non_finite_loss(self, loss: float, batch: dict) -> str:
        """Why the training stops at a batch whose loss is ``loss`` (not finite), and what to change."""
        return (f"The training loss is {loss} at step {self.state.completed_steps + 1}: training diverged, so the run "
                f"stops before the weights take it in. Start again with a lower --learning_rate (now "
                f"{self.args.learning_rate:g}) or more --num_warmup_steps (now {self.args.num_warmup_steps}); the "
                "checkpoints saved so far are kept.")

    def training_loss(self, batch: dict) -> torch.Tensor:
        """The loss of one training batch (the model's own)."""
        return self.model(**batch).loss

    def epoch_loader(self, epoch: int):
        """The training loader positioned at ``epoch`` (and past the batches a resumed run already saw)."""
        self.train_loader.set_epoch(epoch)
        if hasattr(self.data.train, "set_epoch"):
            self.data.train.set_epoch(epoch)
        done_steps = self.state.completed_steps - epoch * self.steps_per_epoch
        if done_steps == 0:
            return self.train_loader
        return self.accelerator.skip_first_batches(
            self.train_loader, done_steps * self.args.gradient_accumulation_steps)

    # -- evaluation ----------------------------------------------------------------------------------------

    @torch.no_grad()
    def evaluate(self) -> dict[str, dict[str, float]]:
        """The task's metrics on every evaluation split."""
        self.model.eval()
        return {split: self.evaluate_split(loader) for split, loader in self.eval_loaders.items()}

    def evaluate_split(self, loader) -> dict[str, float]:
        predictions, references = [], []
        for batch in loader:
            logits = self.model(**batch).logits.float()
            predicted = logits.squeeze(-1) if self.data.metrics.is_regression else logits.argmax(-1)
            predicted, labels = self.accelerator.gather_for_metrics((predicted, batch["labels"]))
            predictions.append(predicted.cpu())
            references.append(labels.cpu())
        return self.data.metrics.compute(torch.cat(predictions).numpy(), torch.cat(references).numpy())

    def record_evaluation(self, epoch: int, train_loss: float, metrics: dict[str, dict[str, float]]) -> None:
        """Log an evaluation, add it to the history, and keep the model if it is the best so far."""
        step = self.state.completed_steps
        self.state.history.append({"epoch": epoch, "step": step, "train_loss": train_loss, "eval": metrics})
        logger.info(f"epoch {epoch} (step {step}): train_loss {train_loss:.4f}, eval {metrics}")
        if self.args.with_tracking:
            flat = {f"{split}/{name}": value for split, values in metrics.items() for name, value in values.items()}
            self.accelerator.log({"train_loss": train_loss, "epoch": epoch, **flat}, step=step)
        self.epoch_loss.zero_()
        self.epoch_batches = 0
        main_value = metrics[next(iter(metrics))][self.data.metrics.main]
        if self.data.metrics.improves(main_value, self.state.best_metric):
            self.state.best_metric, self.state.best_step = main_value, step
            best_folder = checkpoint_root(self.folder.path) / BEST_DIR
            final_folder = self.folder.final_path(best_folder)  # where the adapter of a LoRA run names its base
            replace_folder(self.accelerator, best_folder, lambda partial: save_model_folder(
                self.accelerator, self.model, self.processor, partial, final_folder=final_folder))

    # -- checkpoints ---------------------------------------------------------------------------------------

    def step_checkpoint_due(self) -> bool:
        every = self.args.checkpointing_steps
        return isinstance(every, int) and self.state.completed_steps % every == 0

    def pause_due(self) -> bool:
        return self.state.completed_steps == self.args.stop_after_steps

    def save_checkpoint(self, name: str) -> None:
        """Save the run's state as the checkpoint ``name``; the output folder is in place from then on."""
        self.state.epoch_loss_sum, self.state.epoch_batches = self.epoch_loss.item(), self.epoch_batches
        save_checkpoint(self.accelerator, checkpoint_root(self.folder.path) / name, self.state)
        self.folder.commit(self.accelerator.is_main_process)
        logger.info(f"Saved checkpoint {checkpoint_root(self.folder.path) / name}")

    def resume(self, folder: Path) -> None:
        """Restore the full state of the checkpoint ``folder``, saved by a run with this one's fingerprint."""
        saved = read_state(folder)
        check_resumable(saved, self.state.fingerprint, self.max_steps, folder)
        self.accelerator.load_state(str(folder))
        self.state = saved
        logger.info(f"Resumed from {folder} at step {saved.completed_steps} of {self.max_steps}")

    def log_plan(self) -> None:
        args, total_batch = self.args, (self.args.per_device_train_batch_size * self.accelerator.num_processes
                                        * self.args.gradient_accumulation_steps)
        logger.info(f"{len(self.data.train)} training examples, {self.num_epochs} epoch(s), {self.max_steps} "
                    f"optimizer steps of {total_batch} examples ({args.per_device_train_batch_size} per device x "
                    f"{self.accelerator.num_processes} process(es) x {args.gradient_accumulation_steps} "
                    "accumulation steps)")


def tracker_config(args) -> dict:
    """The run's options that trackers can store (numbers, strings, booleans)."""
    return {name: value for name, value in vars(args).items() if isinstance(value, (int, float, str, bool))}
