"""Fine-tuning runs killed (SIGKILL) at a chosen stage of a checkpoint save, for tests/finetuning/test_resume.py
and tests/finetuning/test_red_team.py.

    python kill_during_save.py JOBS_JSON ENDS_JSON

``JOBS_JSON`` lists jobs ``{"stage": ..., "checkpoint": "step_4", "argv": [...]}``. Each job runs the text
classification script's ``main(argv)`` in a child forked from this process (which imports the libraries once,
before any computation); the child kills itself at ``stage`` of the save of ``checkpoint``:

* ``optimizer_half``: within ``accelerator.save_state``, half of ``optimizer.bin`` written;
* ``state_half``: half of ``training_state.json`` written;
* ``before_rename``: the checkpoint complete, not yet renamed into place;
* ``between_renames``: the folder it replaces moved aside, the new one not yet in place;
* ``final_weights_half``: half of the final ``model.safetensors`` written into the output folder (``checkpoint``
  then names that folder).

The stages are reached through the functions every save goes through (``torch.save``, ``Path.write_text``,
``os.replace``, Transformers' ``safe_save_file``), patched in the child only. ``ENDS_JSON`` gets, per stage, how
the child ended: minus the signal that killed it, or its exit status.
"""

import io
import json
import os
import signal
import sys
from pathlib import Path

# What a run imports lazily, imported once here, before the forks.
import accelerate  # noqa: F401
import datasets  # noqa: F401
import peft  # noqa: F401 (by Transformers' from_pretrained)
import scipy.stats  # noqa: F401 (by the metrics)
import sklearn.metrics  # noqa: F401
import safetensors.torch
import torch
import transformers.modeling_utils

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for the helpers package
from helpers.forked import run_forked  # noqa: E402

from hf_effattn.finetuning.checkpoints import STATE_FILE
from hf_effattn.finetuning.text_classification import main


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def kill_at(stage: str, checkpoint: str) -> None:
    """Patch the functions a save calls so that the save of ``checkpoint`` is killed at ``stage``."""
    def saving(path) -> bool:  # a file of the checkpoint, in its own folder or in the temporary one
        return Path(path).parent.name.lstrip(".").split(".")[0] == checkpoint

    torch_save, write_text, replace = torch.save, Path.write_text, os.replace

    def half_torch_save(obj, target, *args, **kwargs):
        if not (stage == "optimizer_half" and saving(target) and Path(target).name == "optimizer.bin"):
            return torch_save(obj, target, *args, **kwargs)
        buffer = io.BytesIO()
        torch_save(obj, buffer, *args, **kwargs)
        Path(target).write_bytes(buffer.getvalue()[:len(buffer.getvalue()) // 2])
        die()

    def half_write_text(path, data, *args, **kwargs):
        if stage == "state_half" and path.name == STATE_FILE and saving(path):
            write_text(path, data[:len(data) // 2], *args, **kwargs)
            die()
        return write_text(path, data, *args, **kwargs)

    def killing_replace(source, destination, *args, **kwargs):
        if stage == "before_rename" and saving(Path(source) / "file"):
            die()
        replace(source, destination, *args, **kwargs)
        if stage == "between_renames" and saving(Path(destination) / "file"):
            die()

    def half_save_file(tensors, filename, *args, **kwargs):
        if not (stage == "final_weights_half" and saving(filename)):
            return save_file(tensors, filename, *args, **kwargs)
        data = safetensors.torch.save(tensors, *args, **kwargs)
        Path(filename).write_bytes(data[:len(data) // 2])
        die()

    save_file = transformers.modeling_utils.safe_save_file
    torch.save, Path.write_text, os.replace = half_torch_save, half_write_text, killing_replace
    transformers.modeling_utils.safe_save_file = half_save_file


def run_killed(stage: str, checkpoint: str, argv: list[str]) -> int:
    """Run ``main(argv)`` in a child killed at ``stage``; minus the signal that ended it, or its exit status."""
    def killed_run() -> None:
        kill_at(stage, checkpoint)
        main(argv)

    return run_forked(killed_run)


if __name__ == "__main__":
    torch.set_num_threads(1)
    jobs_file, ends_file = sys.argv[1:]
    ends = {job["stage"]: run_killed(job["stage"], job["checkpoint"], job["argv"])
            for job in json.loads(Path(jobs_file).read_text())}
    Path(ends_file).write_text(json.dumps(ends))
