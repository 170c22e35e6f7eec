"""The ``list`` and ``convert`` subcommands."""

from __future__ import annotations

import argparse
import json

import pytest
import torch
import transformers

import hf_effattn
from hf_effattn.commands import convert as conversion_command
from hf_effattn.commands import list as listing
from hf_effattn.commands import main as cli
from helpers.models import save_source, text_config, text_inputs


def run(module, argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    module.add_arguments(parser)
    return module.run(parser.parse_args(argv))


def listed(capsys, argv: list[str]) -> dict[str, list[str]]:
    """``hf-effattn list ARGV``: each section's title (up to the parenthesis) -> the names it lists."""
    assert run(listing, argv) == 0
    sections = {}
    for line in capsys.readouterr().out.splitlines():
        if line.startswith("  "):
            sections[title].append(line.split()[0])
        else:
            title = line.split(" (")[0]
            sections[title] = []
    return sections


def test_list_matches_parts_of_mechanism_and_preset_names(capsys):
    assert listed(capsys, ["psf"]) == {
        "Attention mechanisms matching 'psf'": ["psf"],
        "Model presets matching 'psf'": [name for name in hf_effattn.list_models() if name.endswith("/psf")],
    }
    assert listed(capsys, ["lra-*/psf", "--models"]) == {"Model presets matching 'lra-*/psf'": [
        "lra-image/psf", "lra-listops/psf", "lra-pathfinder/psf", "lra-retrieval/psf", "lra-text/psf"]}
    assert listed(capsys, ["KERF", "--attentions"]) == {"Attention mechanisms matching 'KERF'": ["kerformer"]}
    assert listed(capsys, ["--attentions"]) == {"Attention mechanisms": hf_effattn.list_attentions()}
    assert listed(capsys, ["roberta-base/"])["Attention mechanisms matching 'roberta-base/'"] == ["(none)"]


@pytest.mark.parametrize("argv, listed_names", [
    (["kerformr"], "mechanism or preset"), (["--models", "robrta-base"], "preset"), (["--attentions", "dbb"], "mechanism"),
])
def test_a_pattern_that_matches_nothing_is_refused_naming_the_closest_names_which_list(argv, listed_names, capsys):
    with pytest.raises(SystemExit) as exit:
        cli.main(["list", *argv])
    error = capsys.readouterr().err
    assert exit.value.code == 2 and error.count("\n") == 1
    assert error.startswith(f"hf-effattn list: error: No {listed_names} name matches {argv[-1]!r}: did you mean ")
    closest = error.split("did you mean ")[1].split(",")[0].rstrip("?\n")
    sections = listed(capsys, [*argv[:-1], closest])  # the fix: the first name suggested
    assert any(closest in name for names in sections.values() for name in names)


def test_a_pattern_without_a_close_name_points_to_the_whole_list(capsys):
    with pytest.raises(SystemExit):
        cli.main(["list", "zzzzzz"])
    assert capsys.readouterr().err.endswith("'zzzzzz': hf-effattn list without a pattern shows every name.\n")


def test_version(capsys):
    with pytest.raises(SystemExit) as exit:
        cli.main(["--version"])
    assert exit.value.code == 0
    assert capsys.readouterr().out == (f"hf-effattn {hf_effattn.__version__} (transformers {transformers.__version__}, "
                                       f"torch {torch.__version__})\n")


def test_a_user_error_is_one_line_and_status_2(tmp_path, capsys, monkeypatch):
    missing = tmp_path / "missing"
    argv = ["convert", str(missing), "--attention_type", "psf", "--output_dir", str(tmp_path / "out")]
    with pytest.raises(SystemExit) as exit:
        cli.main(argv)
    assert exit.value.code == 2
    assert capsys.readouterr().err == (f"hf-effattn convert: error: Checkpoint folder {missing} not found: give an "
                                       "existing folder, or a Hub id such as FacebookAI/roberta-base.\n")
    with pytest.raises(FileNotFoundError, match="not found"):  # the traceback on request
        cli.main(["--debug", *argv])
    monkeypatch.setenv("HF_EFFATTN_DEBUG", "1")
    with pytest.raises(FileNotFoundError, match="not found"):
        cli.main(argv)
    assert not (tmp_path / "out").exists()


def test_a_message_over_several_lines_is_printed_on_one(monkeypatch, capsys):
    def refuse(args):
        raise OSError("We couldn't connect.\n  Check your connection.")

    monkeypatch.setattr(listing, "run", refuse)
    with pytest.raises(SystemExit):
        cli.main(["list"])
    assert capsys.readouterr().err == "hf-effattn list: error: We couldn't connect. Check your connection.\n"


def test_a_bug_keeps_its_traceback(monkeypatch):
    def broken(args):
        return {}["missing"]

    monkeypatch.setattr(listing, "run", broken)
    with pytest.raises(KeyError):
        cli.main(["list"])


def test_convert_writes_a_hub_ready_folder(tmp_path):
    source = save_source(transformers.RobertaForTokenClassification, "roberta", tmp_path / "source")
    transformers.RobertaTokenizer().save_pretrained(tmp_path / "source")
    assert run(conversion_command, [str(tmp_path / "source"), "--attention_type", "kerformer", "--output_dir",
                            str(tmp_path / "out"), "--attention_config", '{"se_mode": "channel"}']) == 0
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    assert config["attention_type"] == "kerformer" and config["attention_config"]["se_mode"] == "channel"
    assert config["architectures"] == ["EffAttnRobertaForTokenClassification"]  # the checkpoint's head
    assert "AutoModelForTokenClassification" in config["auto_map"]
    for name in ("model.safetensors", "modeling_effattn_roberta.py", "configuration_effattn.py", "tokenizer_config.json"):
        assert (tmp_path / "out" / name).exists(), name
    card = (tmp_path / "out" / "README.md").read_text()  # the model card, with the converted model's limitations
    assert "its new parameters are untrained: fine-tune the model" in card and "@article{gan2023kerformer," in card
    assert 'AutoModelForTokenClassification.from_pretrained("out", trust_remote_code=True)' in card
    model = hf_effattn.EffAttnRobertaForTokenClassification.from_pretrained(tmp_path / "out")
    torch.testing.assert_close(model.classifier.weight, source.classifier.weight)
    assert model(**text_inputs()).logits.shape == (3, 9, 2)


def test_convert_of_our_own_checkpoint_to_another_mechanism_names_the_option(tmp_path, capsys):
    hf_effattn.EffAttnRobertaModel(text_config("kerformer")).save_pretrained(tmp_path / "kerformer")
    argv = ["convert", str(tmp_path / "kerformer"), "--attention_type", "dba", "--output_dir", str(tmp_path / "dba")]
    with pytest.raises(SystemExit) as exit:
        cli.main(argv)
    assert exit.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith(f"hf-effattn convert: error: {tmp_path / 'kerformer'} was saved with "
                            "attention_type='kerformer'") and "(--convert_attention on the command line)" in error
    assert not (tmp_path / "dba").exists()
    assert cli.main([*argv, "--convert_attention"]) == 0
    assert json.loads((tmp_path / "dba" / "config.json").read_text())["attention_type"] == "dba"


def test_convert_refuses_shape_changes_in_one_line_unless_allowed(tmp_path, capsys):
    hf_effattn.EffAttnRobertaModel(text_config("kerformer")).save_pretrained(tmp_path / "token")
    argv = ["convert", str(tmp_path / "token"), "--attention_type", "kerformer", "--attention_config",
            '{"se_mode": "channel"}', "--convert_attention", "--output_dir", str(tmp_path / "channel")]
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit:
        cli.main(argv)
    assert exit.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]  # after Transformers' load report
    assert error.startswith("hf-effattn convert: error: Some weights") and "--ignore_mismatched_sizes" in error
    assert not (tmp_path / "channel").exists()
    assert cli.main([*argv, "--ignore_mismatched_sizes"]) == 0
    assert json.loads((tmp_path / "channel" / "config.json").read_text())["attention_config"]["se_mode"] == "channel"


def test_converted_sentence_transformer_keeps_its_pooling_and_normalisation(tmp_path):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer

    save_source(transformers.BertModel, "bert", tmp_path / "bert")
    (tmp_path / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "c"]))
    transformers.BertTokenizer(str(tmp_path / "vocab.txt")).save_pretrained(tmp_path / "bert")
    original = SentenceTransformer(modules=[Transformer(str(tmp_path / "bert")), Pooling(16, "mean"), Normalize()])
    original.save(str(tmp_path / "st"))
    argv = [str(tmp_path / "st"), "--attention_type", "sdpa", "--output_dir", str(tmp_path / "out")]
    assert run(conversion_command, argv) == 0
    assert (tmp_path / "out" / "1_Pooling" / "config.json").is_file() and (tmp_path / "out" / "2_Normalize").is_dir()
    converted = SentenceTransformer(str(tmp_path / "out"), trust_remote_code=True, device="cpu")
    assert type(converted[0].model).__name__ == "EffAttnRobertaModel"
    sentences = ["a b c", "c a", "b"]
    expected = original.encode(sentences, convert_to_tensor=True)
    torch.testing.assert_close(converted.encode(sentences, convert_to_tensor=True), expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(expected.norm(dim=-1), torch.ones(3))  # the normalisation is still there


def refused_line(capsys, argv: list[str]) -> str:
    """The one line ``hf-effattn ARGV`` prints when it refuses (exit status 2)."""
    capsys.readouterr()  # what came before
    with pytest.raises(SystemExit) as exit:
        cli.main(argv)
    error = capsys.readouterr().err
    assert exit.value.code == 2 and error.count("\n") == 1, error
    return error


def test_a_file_given_as_the_checkpoint_is_refused_for_the_folder_that_holds_it(tmp_path, capsys):
    save_source(transformers.RobertaModel, "roberta", tmp_path / "source")
    error = refused_line(capsys, ["convert", str(tmp_path / "source" / "config.json"), "--output_dir",
                                  str(tmp_path / "out")])
    assert error == (f"hf-effattn convert: error: Checkpoint {tmp_path / 'source' / 'config.json'} is a file, not a "
                     f"folder: give the folder that holds it (did you mean {tmp_path / 'source'}?), or a Hub id.\n")
    assert not (tmp_path / "out").exists()
    suggested = error.split("did you mean ")[1].split("?")[0]
    assert cli.main(["convert", suggested, "--output_dir", str(tmp_path / "out")]) == 0


def test_offline_a_hub_id_missing_from_the_cache_names_the_download_that_fills_it(tmp_path, capsys, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    argv = ["convert", "someone/tiny-roberta", "--attention_type", "dba", "--output_dir", str(tmp_path / "out")]
    error = refused_line(capsys, argv)
    assert error == ("hf-effattn convert: error: Checkpoint someone/tiny-roberta is neither a local folder nor in the "
                     "Hub cache, and HF_HUB_OFFLINE is set: download it while online first (hf download "
                     "someone/tiny-roberta), or give an existing folder.\n")
    # What `hf download someone/tiny-roberta` leaves in the cache: a snapshot, and the ref naming it.
    commit = "0123456789abcdef0123456789abcdef01234567"
    repository = tmp_path / "hub" / "models--someone--tiny-roberta"
    save_source(transformers.RobertaModel, "roberta", repository / "snapshots" / commit)
    (repository / "refs").mkdir()
    (repository / "refs" / "main").write_text(commit)
    assert cli.main(argv) == 0
    assert json.loads((tmp_path / "out" / "config.json").read_text())["attention_type"] == "dba"
