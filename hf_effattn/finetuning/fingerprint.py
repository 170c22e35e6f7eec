"""The fingerprint of a run: everything that fixes the batches it sees and its optimizer's path.

Two runs with the same fingerprint train the same weights step for step, so a checkpoint may only be resumed
by a run with its fingerprint. It holds every command-line option except those listed in
:data:`NOT_IN_FINGERPRINT` (so an option added later counts until it is listed there), and what the options
resolve to: the step budget in optimizer steps (``--max_train_steps``, or ``--num_train_epochs`` x steps per
epoch, so that either way of giving the same budget matches), the attention the model got (with the
mechanism's default settings), the training data's size and labels, and the processes and precision.
The data's contents are not hashed: the dataset's name, configuration, files and size identify it.
"""

from __future__ import annotations

import json

NOT_IN_FINGERPRINT = frozenset({
    # where and when the run saves, and how it stops, resumes and publishes
    "output_dir", "overwrite_output_dir", "checkpointing_steps", "resume_from_checkpoint", "stop_after_steps",
    "push_to_hub", "hub_model_id", "hub_token", "hub_private_repo", "license",
    # logging and evaluation (evaluation loaders draw from their own generators)
    "with_tracking", "report_to", "per_device_eval_batch_size", "max_eval_samples",
    # the same batches whichever process loads them (each epoch's order comes from the seed)
    "dataloader_num_workers",
    # replaced by the step budget they resolve to
    "num_train_epochs", "max_train_steps",
})


def run_fingerprint(args, accelerator, model, data, steps_per_epoch: int, max_steps: int) -> dict:
    """The fingerprint of the run of ``args`` (parsed options) training ``model`` (prepared) on ``data``
    (``PreparedData``) for ``max_steps`` optimizer steps; JSON values, as a checkpoint stores them."""
    config = accelerator.unwrap_model(model).config
    fingerprint = {f"--{name}": value for name, value in sorted(vars(args).items()) if name not in NOT_IN_FINGERPRINT}
    fingerprint.update({
        "step budget": max_steps,
        "steps per epoch": steps_per_epoch,
        "attention": {"type": config.attention_type, "config": config.attention_config},
        "dataset": [data.dataset_id, data.dataset_config],
        "training examples": len(data.train),
        "labels": data.labels.names,
        "processes": accelerator.num_processes,
        "distributed type": accelerator.distributed_type.value,
        "mixed precision": accelerator.mixed_precision,
    })
    return json.loads(json.dumps(fingerprint, default=str))


def fingerprint_differences(saved: dict, current: dict) -> list[str]:
    """One line per entry where the ``saved`` fingerprint and the ``current`` one differ."""
    missing = "(absent)"
    return [f"{name}: {json.dumps(saved.get(name, missing))} in the checkpoint, "
            f"{json.dumps(current.get(name, missing))} now"
            for name in sorted(saved.keys() | current.keys()) if saved.get(name, missing) != current.get(name, missing)]
