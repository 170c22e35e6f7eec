"""``hf-effattn convert`` loses nothing and accepts nothing silently: the output folder's rules (never the
checkpoint's own folder, a folder that is not empty only with ``--overwrite_output_dir``, checked before anything
loads), a kill at any stage of the save, options that would do nothing, and bad transfer data or reports."""

from __future__ import annotations

import hashlib
import importlib
import json
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers.finetuning import one_torch_thread  # noqa: F401 (autouse: one torch thread)
from helpers.finetuning import contents, tiny_images, tiny_text_checkpoint, tiny_vit_checkpoint

from hf_effattn import EffAttnRobertaModel
from hf_effattn.commands import main as cli
from hf_effattn.conversion import transfer_attention
from hf_effattn.conversion.transfer import REPORT_FILE, TransferReport
from hf_effattn.modeling.pretrained import EffAttnPreTrainedModel

conversion = importlib.import_module("hf_effattn.conversion.convert")  # the package's `convert` is the function
REPO = Path(__file__).resolve().parents[2]


def copied_source(tmp_path) -> Path:
    """A copy of the tiny RoBERTa checkpoint that a test may try to damage."""
    return Path(shutil.copytree(tiny_text_checkpoint(), tmp_path / "source"))


def refused(capsys, argv: list[str]) -> str:
    """Run ``hf-effattn convert ARGV``; assert exit status 2 and return its one error line."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit:
        cli.main(["convert", *argv])
    assert exit.value.code == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and error.startswith("hf-effattn convert: error: "), error
    return error


@pytest.fixture
def nothing_loads(monkeypatch):
    """Within the test, loading the checkpoint's config or model fails the test: what is refused is refused first."""
    def load(*args, **kwargs):
        raise AssertionError("the checkpoint was loaded before the request was checked")

    monkeypatch.setattr(conversion.PreTrainedConfig, "get_config_dict", load)


def test_a_bad_or_missing_option_is_one_line_naming_help(tmp_path, capsys, nothing_loads):
    out = str(tmp_path / "out")
    assert refused(capsys, ["source", "--attention_type", "kerformer", "--max_length", "0", "--output_dir", out]) == (
        "hf-effattn convert: error: argument --max_length: expected an integer >= 1, got '0' "
        "(see hf-effattn convert --help)")
    assert refused(capsys, ["source", "--attention_type", "kerformer"]) == (
        "hf-effattn convert: error: the following arguments are required: --output_dir "
        "(see hf-effattn convert --help)")


# -- the output folder ---------------------------------------------------------------------------------------------

def test_the_checkpoints_own_folder_and_what_holds_it_are_refused_before_anything_loads(tmp_path, capsys,
                                                                                        nothing_loads):
    source = copied_source(tmp_path)
    (source / "1_Pooling").mkdir()
    before = contents(tmp_path)
    cases = {str(source): "is the checkpoint's own folder", str(source / "1_Pooling"): "is part of the checkpoint",
             str(tmp_path): "contains the checkpoint", f"{source}/../source": "is the checkpoint's own folder"}
    for output_dir, problem in cases.items():
        error = refused(capsys, [str(source), "--attention_type", "kerformer", "--output_dir", output_dir,
                                 "--overwrite_output_dir"])
        assert problem in error and "Choose another --output_dir" in error
    assert contents(tmp_path) == before


def test_a_folder_that_is_not_empty_is_refused_then_replaced_whole_on_request(tmp_path, capsys, nothing_loads,
                                                                             monkeypatch):
    out = tmp_path / "out"
    out.mkdir()
    (out / "model.safetensors").write_bytes(b"another model")
    (out / "notes.txt").write_text("mine")
    argv = [tiny_text_checkpoint(), "--attention_type", "kerformer", "--output_dir", str(out)]
    assert "is not empty: pass --overwrite_output_dir" in refused(capsys, argv)
    assert contents(out) == {"model.safetensors": hashlib.sha256(b"another model").hexdigest(),
                             "notes.txt": hashlib.sha256(b"mine").hexdigest()}
    (tmp_path / "file").write_text("")
    assert "is a file, not a folder" in refused(capsys, [*argv[:-1], str(tmp_path / "file")])

    monkeypatch.undo()
    assert cli.main(["convert", *argv, "--overwrite_output_dir"]) == 0
    assert not (out / "notes.txt").exists()
    assert json.loads((out / "config.json").read_text())["attention_type"] == "kerformer"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["file", "out"]  # no temporary folder left
    empty = tmp_path / "empty"
    empty.mkdir()
    conversion.convert(tiny_text_checkpoint(), "dba", empty)  # an empty folder needs no permission
    assert (empty / "model.safetensors").is_file()


# stage -> what `out` holds after a kill at that stage, then once the next command writing there has put right what
# the kill left (kill_during_convert.py): the previous folder, or the new one, complete before the kill
KILL_STAGES = {"weights_half": ("previous", "previous"), "before_rename": ("previous", "new"),
               "between_renames": (None, "new"), "before_cleanup": ("new", "new")}


def test_a_kill_at_any_stage_of_the_save_leaves_the_previous_folder_or_the_new_one(tmp_path):
    source = tiny_text_checkpoint()  # built (drawing random numbers) before the seed is set
    torch.manual_seed(0)
    conversion.convert(source, "kerformer", tmp_path / "new" / "out")
    new, previous, jobs = contents(tmp_path / "new" / "out"), {}, []
    for stage in KILL_STAGES:
        conversion.convert(tiny_text_checkpoint(), "dba", tmp_path / stage / "out")
        previous[stage] = contents(tmp_path / stage / "out")
        jobs.append({"stage": stage, "arguments": {
            "checkpoint": tiny_text_checkpoint(), "attention_type": "kerformer",
            "output_dir": str(tmp_path / stage / "out"), "overwrite_output_dir": True}})
    (tmp_path / "jobs.json").write_text(json.dumps(jobs))
    script = REPO / "tests" / "helpers" / "kill_during_convert.py"
    result = subprocess.run([sys.executable, str(script), str(tmp_path / "jobs.json"), str(tmp_path / "ends.json")],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-4000:]
    ends = json.loads((tmp_path / "ends.json").read_text())
    for stage, (killed, restored) in KILL_STAGES.items():
        assert ends[stage] == -signal.SIGKILL, result.stderr[-4000:]
        out, folders = tmp_path / stage / "out", {"new": new, "previous": previous[stage]}
        assert new != previous[stage]
        if killed is None:  # moved aside whole, in the instant before the new folder's rename
            assert not out.exists() and contents(tmp_path / stage / ".out.replaced") == folders["previous"]
            assert contents(tmp_path / stage / ".out.complete") == folders["new"]
        else:
            assert contents(out) == folders[killed], stage
        with pytest.raises(ValueError, match="is not empty"):  # the next conversion first puts things right
            conversion.convert(tiny_text_checkpoint(), "psf", out)
        assert contents(out) == folders[restored], stage
        assert [path.name for path in (tmp_path / stage).iterdir()] == ["out"], stage


# -- options that would do nothing ---------------------------------------------------------------------------------

def test_options_that_would_do_nothing_are_refused(tmp_path, capsys, nothing_loads):
    base = [tiny_text_checkpoint(), "--attention_type", "kerformer", "--output_dir", str(tmp_path / "out")]
    error = refused(capsys, [*base, "--transfer_steps", "5", "--seed", "3"])
    assert "option(s) --transfer_steps, --seed act only on an attention transfer: add --transfer_data" in error
    assert "--transfer_column" in refused(capsys, [*base, "--transfer_column", "text"])
    assert not (tmp_path / "out").exists()


def test_settings_and_labels_a_head_does_not_have_are_refused(tmp_path, capsys):
    base = [tiny_text_checkpoint(), "--output_dir", str(tmp_path / "out")]
    error = refused(capsys, [*base, "--attention_type", "sdpa", "--attention_config", '{"se_mode": "channel"}'])
    assert "Unknown setting(s) se_mode for attention 'sdpa'" in error
    error = refused(capsys, [*base, "--attention_type", "dba", "--num_labels", "3"])  # the masked-LM head
    assert "--num_labels does nothing for the 'masked-lm' head" in error and "--task sequence-classification" in error
    assert "'base' head" in refused(capsys, [*base, "--attention_type", "dba", "--task", "base", "--num_labels", "3"])
    with pytest.raises(ValueError, match="'question-answering' head, which has no labels"):
        conversion.convert(tiny_text_checkpoint(), "dba", tmp_path / "out", task="question-answering", num_labels=3)
    with pytest.raises(ValueError, match="Unknown transfer argument.s. stepz: known are data, column"):
        conversion.convert(tiny_text_checkpoint(), "dba", tmp_path / "out", transfer={"data": "a.txt", "stepz": 3})
    with pytest.raises(ValueError, match="transfer needs its data"):
        conversion.convert(tiny_text_checkpoint(), "dba", tmp_path / "out", transfer={"steps": 3})
    assert not (tmp_path / "out").exists()
    model = conversion.convert(tiny_text_checkpoint(), "dba", tmp_path / "out", task="token-classification",
                               num_labels=3)
    assert model.classifier.out_features == 3


# -- attention transfer: its teacher, its data, its report ---------------------------------------------------------

def test_a_teacher_that_is_not_softmax_attention_is_refused():
    teacher = EffAttnRobertaModel.from_pretrained(tiny_text_checkpoint(), attention_type="kerformer")
    model = EffAttnRobertaModel.from_pretrained(tiny_text_checkpoint(), attention_type="dba")
    batches = [{"input_ids": torch.tensor([[0, 5, 6, 2]])}]
    with pytest.raises(ValueError, match="The teacher has 'kerformer' attention, not softmax, so it cannot teach"):
        transfer_attention(model, teacher, batches, steps=1, progress=False)


@pytest.fixture
def no_model_loads(monkeypatch):
    """Loading the model fails the test: the transfer data is checked before."""
    def from_pretrained(*args, **kwargs):
        raise AssertionError("the model was loaded before the transfer data was checked")

    monkeypatch.setattr(EffAttnPreTrainedModel, "from_plan", classmethod(from_pretrained))


def bad_transfer_data(folder: Path) -> dict[str, tuple[str, str, dict]]:
    """Case -> (file, the error's words, convert's other arguments)."""
    from datasets import Dataset

    (folder / "empty.csv").write_text("")
    (folder / "header.csv").write_text("text,label\n")
    (folder / "binary.txt").write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff\xfe")
    (folder / "nul.txt").write_bytes(b"w1 w2\x00\x00\x00w3\n\x00\x00\n")  # valid UTF-8, but binary
    (folder / "cut.jsonl").write_text('{"text": "a w1"}\n{"text": ')
    Dataset.from_dict({"body": ["w1 w2", "w3"]}).to_csv(str(folder / "body.csv"))
    images = folder / "images"
    images.mkdir()
    for i, image in enumerate(tiny_images(2, 2, seed=0)[0]):
        image.save(images / f"{i}.png")
    text = {"checkpoint": tiny_text_checkpoint()}
    vision = {"checkpoint": tiny_vit_checkpoint()}
    return {
        "empty file": ("empty.csv", "The transfer data file '{}' is empty: give a .txt file", text),
        "header only": ("header.csv", "Cannot read the transfer data '{}' (ValueError: Instruction \"train\" "
                                      "corresponds to no data!): give a .txt file", text),
        "unreadable": ("binary.txt", "Cannot read the transfer data '{}' (UnicodeDecodeError", text),
        "NUL bytes": ("nul.txt", "Cannot read the transfer data '{}' (ValueError: a NUL character at character 5: "
                                 "it is not a text file): give a .txt file", text),
        "cut short": ("cut.jsonl", "Cannot read the transfer data '{}' (", text),
        "wrong column": ("body.csv", "has none of the usual columns of texts (text, sentence", text),
        "missing column": ("body.csv", "--transfer_column 'title' is not among the columns ['body']", {
            **text, "column": "title"}),
        "images, text model": ("images", "has none of the usual columns of texts", text),
        "images as text": ("images", "Column 'image' of the transfer data '{}' holds images, but the model reads "
                                     "texts", {**text, "column": "image"}),
        "text, image model": ("body.csv", "Column 'body' of the transfer data '{}' holds texts, but the model reads "
                                          "images", {**vision, "column": "body"}),
    }


def test_bad_transfer_data_is_one_clear_error_before_the_model_loads(tmp_path, no_model_loads):
    for case, (name, words, arguments) in bad_transfer_data(tmp_path).items():
        source = str(tmp_path / name)
        transfer = {"data": source, "steps": 1, **{k: v for k, v in arguments.items() if k == "column"}}
        with pytest.raises(ValueError) as error:
            conversion.convert(arguments["checkpoint"], "kerformer", tmp_path / "out", transfer=transfer)
        message = str(error.value)
        assert words.format(source) in message and "\n" not in message, (case, message)
    assert not (tmp_path / "out").exists()


def test_a_malformed_or_foreign_transfer_report_is_named_at_once(tmp_path):
    good = TransferReport("dba", "attention", 2, 0.003, 8, 0.5, 0.9, [], data="a.txt")
    good.save(tmp_path)
    assert TransferReport.read(tmp_path) == good
    for text in ('{"attention_type": "dba", "la', '[1, 2]', '{"hello": 1}',
                 json.dumps({**good.to_dict(), "steps": "many"}),
                 json.dumps({**good.to_dict(), "layers": [{"layer": 0, "mse_before": None, "mse_after": 1,
                                                            "cosine_before": 0, "cosine_after": 1}]})):
        (tmp_path / REPORT_FILE).write_text(text)
        with pytest.raises(ValueError, match=f"{tmp_path / REPORT_FILE} is not an attention-transfer report .*: "
                                             "remove it, or write the folder anew"):
            TransferReport.read(tmp_path)


def test_a_resumed_fine_tuning_run_checks_its_transfer_report_before_training(tmp_path):
    from types import SimpleNamespace

    from hf_effattn.finetuning.run import attention_transfer

    args = SimpleNamespace(attention_transfer_steps=4, output_dir=str(tmp_path))
    model = SimpleNamespace(config=SimpleNamespace(attention_type="kerformer"))
    report = TransferReport("kerformer", "attention", 4, 0.003, 16, 0.5, 0.9, [], data="texts")
    report.save(tmp_path)
    assert attention_transfer(args, model, None, 4, "cpu", True, resuming=True) == report.to_dict()
    TransferReport(**{**vars(report), "attention_type": "dba"}).save(tmp_path)
    with pytest.raises(ValueError, match="reports a transfer into 'dba' attention, but this run trains 'kerformer'"):
        attention_transfer(args, model, None, 4, "cpu", True, resuming=True)
    (tmp_path / REPORT_FILE).write_text('{"steps": 4}')
    with pytest.raises(ValueError, match="is not an attention-transfer report"):
        attention_transfer(args, model, None, 4, "cpu", True, resuming=True)
