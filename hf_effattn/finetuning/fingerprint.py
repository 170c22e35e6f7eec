"""The fingerprint of a run: everything that fixes the batches it sees and its optimizer's path.

Two runs with the same fingerprint train the same weights step for step, so a checkpoint may only be resumed
by a run with its fingerprint. It holds every command-line option except those listed in
:data:`NOT_IN_FINGERPRINT` (so an option added later counts until it is listed there), and what the options
resolve to: the step budget in optimizer steps (``--max_train_steps``, or ``--num_train_epochs`` x steps per
epoch, so that either way of giving the same budget matches), the attention the model got (with the
mechanism's default settings), the training data's size and labels, and the processes and precision.
The data's contents are not hashed: the dataset's name, configuration, files and size identify it.

The part known from the options and the starting model's ``config.json`` (:func:`settings_fingerprint`: its sizes
and attention, so that a model folder changed since, e.g. extended to more positions, is noticed) is checked before
anything loads; the rest (the data's size, the steps per epoch, the model's attention) when the run starts. An entry
that one fingerprint lacks counts as ``None``: an option that a later version drops, and that was unset, changes
nothing; but an entry that checkpoints of earlier versions lack (:data:`ADDED_LATER`) is compared only where the
checkpoint has it. Two entries that are both dicts are compared key by key.
"""

from __future__ import annotations

import json

from ..modeling.local_settings import LOCAL_PART_SETTINGS

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
ADDED_LATER = frozenset({"model"})  # entries that checkpoints of earlier versions lack


def model_fingerprint(name_or_path: str) -> dict | None:
    """What fixes the shapes of the model a run starts from, from its ``config.json`` (:func:`model_shape`); ``None``
    for a preset, whose shapes are the package's."""
    from transformers import PreTrainedConfig

    from .models import is_preset

    return None if is_preset(name_or_path) else model_shape(PreTrainedConfig.get_config_dict(name_or_path)[0])


def model_shape(config_dict: dict) -> dict:
    """What of a model's ``config.json`` fixes its weights' shapes and what they compute: every integer (or list of
    integers) and its attention, the local part's settings included."""
    def is_size(value) -> bool:
        values = value if isinstance(value, list) else [value]
        return all(isinstance(item, int) and not isinstance(item, bool) for item in values)

    return {key: value for key, value in sorted(config_dict.items())
            if is_size(value) or key in ("attention_type", "attention_config", *LOCAL_PART_SETTINGS)}


def settings_fingerprint(args, accelerator) -> dict:
    """The part of the fingerprint known before anything loads: the options, the starting model's sizes and attention
    (:func:`model_fingerprint`), the processes and precision, and the step budget where ``--max_train_steps`` gives
    it; JSON values."""
    fingerprint = {f"--{name}": value for name, value in sorted(vars(args).items()) if name not in NOT_IN_FINGERPRINT}
    fingerprint.update({
        "model": model_fingerprint(args.model_name_or_path),
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
    differ, an absent entry counting as ``None``, two dicts compared key by key; options now left out of fingerprints
    are not compared, nor entries added later (:data:`ADDED_LATER`) that ``saved`` lacks."""
    names = (saved.keys() | current.keys() if names is None else set(names)) - UNCHECKED
    lines = []
    for name in sorted(names - (ADDED_LATER - saved.keys())):
        old, new = saved.get(name), current.get(name)
        if isinstance(old, dict) and isinstance(new, dict):
            lines += entry_differences(old, new, f"{name} ")
        elif old != new:
            lines += entry_differences({name: old} if name in saved else {}, {name: new} if name in current else {})
    return lines


def entry_differences(saved: dict, current: dict, prefix: str = "") -> list[str]:
    """One line per key of either dict whose values differ, named with ``prefix``; an absent key shown as such."""
    def shown(values: dict, key: str) -> str:
        return json.dumps(values[key]) if key in values else "(absent)"

    return [f"{prefix}{key}: {shown(saved, key)} in the checkpoint, {shown(current, key)} now"
            for key in sorted(saved.keys() | current.keys()) if saved.get(key) != current.get(key)]
