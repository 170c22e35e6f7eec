"""Red team, output folders: every path a command reads is protected, and an output folder on any filesystem (a
mount point, a symbolic link, the working directory) is written without losing anything, tried as a hostile but
realistic user would, with ``hf-effattn convert`` and ``run_mlm.py`` on tiny checkpoints.

Each case states the command, what it must do (a one-line refusal, or the right result), and that what it read is
byte-for-byte unchanged. A real mount point is used where the machine allows one (a tmpfs and a bind mount, made in
a user and mount namespace with ``unshare``); everywhere, a rename refused with ``EBUSY`` is simulated.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys

import pytest
import torch
from helpers.finetuning import one_torch_thread  # noqa: F401 (autouse: one torch thread)
from helpers.finetuning import REPO, contents, load_script, saved_weights, tiny_text_checkpoint
from helpers.red_team import finished_mlm_run  # noqa: F401 (a fixture)
from helpers.red_team import copied, mlm_argv, refused, run_mlm, texts_file

from hf_effattn.commands import main as cli
from hf_effattn.conversion import convert

HIDDEN = (".partial", ".complete", ".replacing", ".replaced")  # the names a replacement uses, none left behind


def no_leftovers(*folders) -> bool:
    """Whether no folder among ``folders`` (nor beside them) holds a hidden folder of a replacement."""
    places = {folder for folder in folders} | {folder.parent for folder in folders}
    return not [entry for place in places for entry in place.iterdir() if entry.name.endswith(HIDDEN)]


def converted(output_dir, attention_type: str = "kerformer") -> dict:
    """``hf-effattn convert`` of the tiny checkpoint into ``output_dir``, replacing what it holds; its config."""
    assert cli.main(["convert", tiny_text_checkpoint(), "--attention_type", attention_type, "--output_dir",
                     str(output_dir), "--overwrite_output_dir"]) == 0
    return json.loads((output_dir / "config.json").read_text())


# -- 1. every path a command reads ----------------------------------------------------------------------------------

def test_an_attention_settings_file_inside_the_output_folder_is_refused_not_deleted(tmp_path):
    out = tmp_path / "o"
    out.mkdir()
    (out / "window.json").write_text('{"local_window": 4}')
    train = texts_file(tmp_path / "data")
    for flags in ([], ["--overwrite_output_dir"]):
        argv = mlm_argv(tiny_text_checkpoint(), train, out, "--attention_type", "kerformer", "--attention_config",
                        str(out / "window.json"), *flags)
        message = refused(load_script("run_mlm").main, argv, [out, train], "contains the attention settings file")
        assert message == (f"--output_dir {out} contains the attention settings file (--attention_config "
                           f"{out / 'window.json'}): replacing the folder would delete it. Choose another "
                           f"--output_dir, outside {out / 'window.json'}.")
    assert (out / "window.json").read_text() == '{"local_window": 4}'


# -- 2. output folders on any filesystem ----------------------------------------------------------------------------

def test_a_symbolic_link_is_written_through_and_stays_a_link(tmp_path):
    target, link = tmp_path / "volume", tmp_path / "out"
    target.mkdir()
    (target / "notes.txt").write_text("mine")
    link.symlink_to(target)
    assert converted(link)["attention_type"] == "kerformer"
    assert link.is_symlink() and link.resolve() == target and not (target / "notes.txt").exists()
    assert converted(link, "dba")["attention_type"] == "dba"  # once more, into the same link
    assert link.is_symlink() and json.loads((target / "config.json").read_text())["attention_type"] == "dba"
    assert no_leftovers(link, target)


def test_the_working_directory_is_a_folder_like_any_other(tmp_path, monkeypatch):
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.chdir(empty)
    assert cli.main(["convert", tiny_text_checkpoint(), "--attention_type", "kerformer", "--output_dir", "."]) == 0
    assert (empty / "model.safetensors").is_file() and os.getcwd() == str(empty)
    train = texts_file(tmp_path / "data")
    run_mlm(tiny_text_checkpoint(), train, ".", "--overwrite_output_dir")  # a finished run replaces the conversion
    assert os.getcwd() == str(empty) and (empty / "all_results.json").is_file()
    assert json.loads((empty / "config.json").read_text())["attention_type"] == "sdpa" and no_leftovers(empty)


def refusing_to_rename(monkeypatch, *folders) -> None:
    """``os.replace`` of ``folders`` themselves fails with ``EBUSY``, as renaming a mount point does."""
    busy, rename = {str(folder) for folder in folders}, os.replace

    def replace(source, destination, *args, **kwargs):
        if {os.path.abspath(source), os.path.abspath(destination)} & busy:
            raise OSError(errno.EBUSY, "Device or resource busy", str(source))
        return rename(source, destination, *args, **kwargs)

    monkeypatch.setattr(os, "replace", replace)


def test_a_folder_that_cannot_be_renamed_is_replaced_entry_by_entry(tmp_path, monkeypatch):
    out = tmp_path / "volume"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    refusing_to_rename(monkeypatch, out)  # a run's first checkpoint goes the same way (below, and the real mounts)
    assert converted(out)["attention_type"] == "kerformer"
    assert not (out / "notes.txt").exists() and no_leftovers(out)


def moving_in_fails(monkeypatch) -> None:
    """Moving an entry of a complete new folder into its place fails with ``ENOSPC``, as on a full disk."""
    move = shutil.move

    def full_disk(source, destination, *args, **kwargs):
        if ".complete" in str(source):
            raise OSError(errno.ENOSPC, "No space left on device", str(destination))
        return move(source, destination, *args, **kwargs)

    monkeypatch.setattr(shutil, "move", full_disk)


def test_a_move_that_fails_keeps_the_new_folder_and_the_next_command_puts_it_in_place(tmp_path, monkeypatch):
    out = tmp_path / "out"
    converted(out, "dba")
    refusing_to_rename(monkeypatch, out)
    moving_in_fails(monkeypatch)
    with pytest.raises(OSError, match=rf"Could not put the new content of {out} in place .*it is kept, complete, in "
                                      rf"{out.parent / '.out.complete'}"):
        convert(tiny_text_checkpoint(), "kerformer", out, overwrite_output_dir=True)
    kept = contents(tmp_path / ".out.complete")
    assert json.loads((tmp_path / ".out.complete" / "config.json").read_text())["attention_type"] == "kerformer"
    monkeypatch.undo()
    with pytest.raises(ValueError, match="is not empty"):  # the next command first puts the new folder in place
        convert(tiny_text_checkpoint(), "psf", out)
    assert contents(out) == kept and no_leftovers(out)


def test_a_run_whose_first_checkpoint_cannot_be_moved_in_resumes_from_it(tmp_path, monkeypatch, finished_mlm_run):
    reference, train = finished_mlm_run
    out = tmp_path / "volume"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    refusing_to_rename(monkeypatch, out)
    moving_in_fails(monkeypatch)
    with pytest.raises(OSError, match="it is kept, complete, in .*resume with --resume_from_checkpoint latest"):
        run_mlm(tiny_text_checkpoint(), train, out, "--overwrite_output_dir")
    monkeypatch.undo()
    assert run_mlm(tiny_text_checkpoint(), train, out, "--resume_from_checkpoint", "latest").finished
    assert not (out / "notes.txt").exists() and no_leftovers(out)
    assert all(torch.equal(saved_weights(out)[name], weight) for name, weight in saved_weights(reference).items())


MOUNTED = """
import json, os, sys
sys.path.insert(0, {tests!r})
from helpers.red_team import mlm_argv
from helpers.finetuning import contents, load_script
from hf_effattn.conversion import convert

tmpfs, bound, checkpoint, train = sys.argv[1:]
for folder in (tmpfs, bound):
    open(os.path.join(folder, "notes.txt"), "w").write("mine")
convert(checkpoint, "kerformer", tmpfs, overwrite_output_dir=True)
load_script("run_mlm").main(mlm_argv(checkpoint, train, bound, "--overwrite_output_dir"))
mounts = [line.split()[1] for line in open("/proc/self/mounts")]
print(json.dumps({{folder: {{"mounted": folder in mounts, "files": sorted(contents(folder))}} for folder in (tmpfs, bound)}}))
"""


def mount_namespaces_allowed() -> bool:
    """Whether this machine lets an unprivileged process mount in a user and mount namespace of its own."""
    if shutil.which("unshare") is None:
        return False
    trial = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "true"], capture_output=True)
    return trial.returncode == 0


@pytest.mark.skipif(not mount_namespaces_allowed(), reason="no mount namespace on this machine: EBUSY is simulated")
def test_a_real_mount_point_is_written_in_place(tmp_path, finished_mlm_run):
    _, train = finished_mlm_run
    tmpfs, bound, source = tmp_path / "tmpfs", tmp_path / "bound", tmp_path / "source"
    for folder in (tmpfs, bound, source):
        folder.mkdir()
    script = ('mount -t tmpfs tmpfs "$1" && mount --bind "$3" "$2" && exec "$5" -c "$6" "$1" "$2" "$4" "$7"')
    command = ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script, "sh", str(tmpfs), str(bound),
               str(source), tiny_text_checkpoint(), sys.executable, MOUNTED.format(tests=str(REPO / "tests")),
               str(train)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads(result.stdout.strip().splitlines()[-1])
    for folder in (tmpfs, bound):
        assert found[str(folder)]["mounted"] and "notes.txt" not in found[str(folder)]["files"]
        assert "model.safetensors" in found[str(folder)]["files"]
        assert not [name for name in found[str(folder)]["files"] if name.split("/")[0].endswith(HIDDEN)]
    assert "all_results.json" in found[str(bound)]["files"]
    assert sorted(contents(source)) == found[str(bound)]["files"]  # written through the mount, into its folder
