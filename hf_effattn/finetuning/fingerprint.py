"""The fingerprint of a run: everything that fixes the batches it sees and its optimizer's path.

Two runs with the same fingerprint train the same weights step for step, so a checkpoint may only be resumed
by a run with its fingerprint. It holds every command-line option except those listed in
:data:`NOT_IN_FINGERPRINT` (so an option added later counts until it is listed there), and what the options
resolve to: the step budget in optimizer steps (``--max_train_steps``, or ``--num_train_epochs`` x steps per
epoch, so that either way of giving the same budget matches), the attention the model got (with the
mechanism's default settings), the training data's size and labels, and the processes and precision.
The data's contents are not hashed: the dataset's name, configuration, files and size identify it.

The part known from the options alone (:func:`settings_fingerprint`) is checked before the data loads; the rest
(the data's size, the steps per epoch, the model's attention) when the run starts. An entry that one fingerprint
lacks counts as ``None``: an option that a later version drops, and that was unset, changes nothing.
"""

from __future__ import annotations

import json

NOT_IN_FINGERPRINT = frozenset({
    # where and when the run saves, and how it stops, resumes and publishes
    "output_dir", "overwrite_output_dir", "checkpointing_steps", "resume_from_checkpoint", "stop_after_steps",
    "push_to_hub", "hub_model_id", "hub_token", "hub_private_repo", "license",
    # where the attention settings were read from (the settings themselves count)
    "attention_config_file",
    # logging and evaluation (evaluation loaders draw from their own generators)
    "with_tracking", "report_to", "per_device_eval_batch_size", "max_eval_samples",
    # the same batches whichever process loads them (each epoch's order comes from the seed)
    "dataloader_num_workers",
    # replaced by the step budget they resolve to
    "num_train_epochs", "max_train_steps",
    # recomputes activations in the backward pass: the same gradients, dropout included
    "gradient_checkpointing",
})
UNCHECKED = frozenset(f"--{name}" for name in NOT_IN_FINGERPRINT)  # in checkpoints of versions that checked them


def settings_fingerprint(args, accelerator) -> dict:
    """The part of the fingerprint that the options and the processes give, before the data loads: the options, the
    processes and precision, and the step budget where ``--max_train_steps`` gives it; JSON values."""
    fingerprint = {f"--{name}": value for name, value in sorted(vars(args).items()) if name not in NOT_IN_FINGERPRINT}
    fingerprint.update({
        "processes": accelerator.num_processes,
        "distributed type": accelerator.distributed_type.value,
        "mixed precision": accelerator.mixed_precision,
    })
    if args.max_train_steps:
        fingerprint["step budget"] = args.max_train_steps
    return json.loads(json.dumps(fingerprint, default=str))


def run_fingerprint(args, accelerator, model, data, steps_per_epoch: int, max_steps: int) -> dict:
    """The fingerprint of the run of ``args`` (parsed options) training ``model`` (prepared) on ``data``
    (``PreparedData``) for ``max_steps`` optimizer steps; JSON values, as a checkpoint stores them."""
    config = accelerator.unwrap_model(model).config
    fingerprint = {
        **settings_fingerprint(args, accelerator),
        "step budget": max_steps,
        "steps per epoch": steps_per_epoch,
        "attention": {"type": config.attention_type, "config": config.attention_config},
        "dataset": [data.dataset_id, data.dataset_config],
        "training examples": len(data.train),
        "labels": data.labels.names,
    }
    return json.loads(json.dumps(fingerprint, default=str))


def fingerprint_differences(saved: dict, current: dict, names=None) -> list[str]:
    """One line per entry (of ``names``; default: of either) where the ``saved`` fingerprint and the ``current`` one
    differ, an absent entry counting as ``None``; options now left out of fingerprints are not compared."""
    def shown(fingerprint: dict, name: str) -> str:
        return json.dumps(fingerprint[name]) if name in fingerprint else "(absent)"

    names = (saved.keys() | current.keys() if names is None else set(names)) - UNCHECKED
    return [f"{name}: {shown(saved, name)} in the checkpoint, {shown(current, name)} now"
            for name in sorted(names) if saved.get(name) != current.get(name)]
