"""Conversions killed (SIGKILL) at a chosen stage of writing their output folder, for tests/conversion/test_convert.py.

    python kill_during_convert.py JOBS_JSON ENDS_JSON

``JOBS_JSON`` lists jobs ``{"stage": ..., "arguments": {...}}``; each runs ``convert(**arguments)`` (with
``torch.manual_seed(0)`` first) in a child forked from this process, which has imported the libraries once. The
child kills itself at ``stage``:

* ``weights_half``: half of ``model.safetensors`` written into the temporary folder;
* ``before_rename``: the new folder complete, not yet renamed into place;
* ``between_renames``: the previous folder moved aside, the new one not yet in place;
* ``before_cleanup``: the new folder in place, the previous one not yet removed.

The stages are reached through the functions the save goes through (Transformers' ``safe_save_file``,
``os.replace``, ``shutil.rmtree``), patched in the child only. ``ENDS_JSON`` gets, per stage, how the child ended:
minus the signal that killed it, or its exit status.
"""

import json
import os
import shutil
import signal
import sys
from pathlib import Path

import safetensors.torch
import torch
import transformers.modeling_utils

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for the helpers package
from helpers.forked import run_forked  # noqa: E402

from hf_effattn.conversion import convert
from hf_effattn.folders.folder_replacement import REPLACED_SUFFIX


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def kill_at(stage: str) -> None:
    """Patch the functions the save calls so that it is killed at ``stage``."""
    replace, rmtree = os.replace, shutil.rmtree

    def half_save_file(tensors, filename, *args, **kwargs):
        data = safetensors.torch.save(tensors, *args, **kwargs)
        Path(filename).write_bytes(data[:len(data) // 2])
        die()

    def killing_replace(source, destination, *args, **kwargs):  # only the renames of the output folder
        if stage == "before_rename" and str(destination).endswith(REPLACED_SUFFIX):
            die()
        replace(source, destination, *args, **kwargs)
        if stage == "between_renames" and str(destination).endswith(REPLACED_SUFFIX):
            die()

    def killing_rmtree(path, *args, **kwargs):
        if stage == "before_cleanup" and Path(path).name.endswith(REPLACED_SUFFIX) and Path(path).exists():
            die()
        rmtree(path, *args, **kwargs)

    if stage == "weights_half":
        transformers.modeling_utils.safe_save_file = half_save_file
    os.replace, shutil.rmtree = killing_replace, killing_rmtree


def run_killed(stage: str, arguments: dict) -> int:
    """Run ``convert(**arguments)`` in a child killed at ``stage``; minus the signal that ended it, or its status."""
    def killed_conversion() -> None:
        torch.manual_seed(0)
        kill_at(stage)
        convert(**arguments)

    return run_forked(killed_conversion)


if __name__ == "__main__":
    torch.set_num_threads(1)
    jobs_file, ends_file = sys.argv[1:]
    ends = {job["stage"]: run_killed(job["stage"], job["arguments"]) for job in json.loads(Path(jobs_file).read_text())}
    Path(ends_file).write_text(json.dumps(ends))
