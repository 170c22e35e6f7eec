"""``hf-effattn demo --quick``: trains two mechanisms on the built-in task, writes a Hub-ready folder, and
reloads it as remote code in a process without the package."""

import argparse
import json
import re

import pytest
from helpers.finetuning import one_torch_thread  # noqa: F401 (autouse: one torch thread)

from hf_effattn.commands import demo
from hf_effattn.commands.main import main


def test_quick_demo_trains_both_mechanisms_and_reloads_as_remote_code(tmp_path, capsys):
    assert main(["demo", "--quick", "--threads", "1", "--output_dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "kerformer" in out and "sdpa" in out and "validation accuracy" in out
    assert "32/32 predictions identical" in out
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["attention_type"] == "kerformer" and "auto_map" in config
    for file in ("model.safetensors", "tokenizer.json", "README.md", "modeling_effattn_roberta.py"):
        assert (tmp_path / file).is_file(), file
    assert config["id2label"] == {"0": "a", "1": "b"}


def test_demo_with_another_mechanism_and_the_same_baseline_replaces_an_earlier_run_when_asked(tmp_path, capsys):
    (tmp_path / "model.safetensors").write_text("an earlier run's model")
    argv = ["demo", "--quick", "--threads", "1", "--attention", "sdpa", "--output_dir", str(tmp_path)]
    with pytest.raises(SystemExit) as exit:
        main(argv)
    assert exit.value.code == 2
    out, error = capsys.readouterr()
    assert error == (f"hf-effattn demo: error: --output_dir {tmp_path} is not empty: pass --overwrite_output_dir "
                     "(overwrite_output_dir=True) to replace it whole, or choose another --output_dir.\n")
    parser = argparse.ArgumentParser()
    demo.add_arguments(parser)
    demo_options = {option for action in parser._actions for option in action.option_strings}
    assert set(re.findall(r"--\w+", error)) <= demo_options  # the fix it names is the demo's own
    assert "Fine-tuning with" not in out  # refused before anything trained
    assert main([*argv, "--overwrite_output_dir"]) == 0
    out = capsys.readouterr().out
    assert out.count("Fine-tuning with") == 1  # the baseline is the mechanism: trained once
