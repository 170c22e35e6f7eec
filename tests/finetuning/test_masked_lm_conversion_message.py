"""A masked-LM run that converts one of this package's checkpoints to another mechanism (``--convert_attention``)
says so once: the options' check runs the load's pre-flight check without its log line, which the load writes."""

from __future__ import annotations

from helpers.finetuning import one_torch_thread  # noqa: F401 (autouse: one torch thread)
from helpers.finetuning import tiny_text_checkpoint, training_options
from hf_effattn.conversion import convert
from hf_effattn.finetuning import masked_lm


def test_the_conversion_of_the_checkpoints_attention_is_said_once(tmp_path, caplog):
    convert(tiny_text_checkpoint(), "sdpa", tmp_path / "sdpa", base_model="someone/tiny")
    (tmp_path / "train.txt").write_text("\n".join(f"w{i} w{i + 1} w{i + 2} and some words after them" for i in range(80)))
    caplog.clear()
    masked_lm.main(["--model_name_or_path", str(tmp_path / "sdpa"), "--attention_type", "dba", "--convert_attention",
                    "--train_file", str(tmp_path / "train.txt"), "--max_seq_length", "32", "--max_train_steps", "1",
                    *training_options(tmp_path / "run")])
    said = [record.getMessage() for record in caplog.records if record.getMessage().startswith("Converting ")]
    assert len(said) == 1 and said[0].startswith(f"Converting {tmp_path / 'sdpa'} from attention_type='sdpa'")
    assert "to attention_type='dba'" in said[0]
