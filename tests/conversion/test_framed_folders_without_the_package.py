"""A block model pretrained framed, read with Transformers alone: its folder's tokenizer (``EffAttnBlockTokenizer``,
behind ``AutoTokenizer(..., trust_remote_code=True)``) frames long texts as ``tokenize_in_blocks`` does, so that
in a fresh process where ``hf_effattn`` cannot be imported, offline, tokenizer and model give the package's outputs;
``hf-effattn convert`` of such a folder keeps the framing where the converted model reads the same blocks, and its
card shows the two lines that load tokenizer and model. Tiny
RoBERTa checkpoints saved by Transformers, tiny texts."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap

import torch
from helpers.finetuning import tiny_text_checkpoint, tiny_tokenizer
from helpers.models import BLOCK_PACKAGE

import hf_effattn
from hf_effattn.block_tokens import framed_as_saved, tokenize_in_blocks
from hf_effattn.modeling.tokenization_effattn import EffAttnBlockTokenizer

BLOCK, LENGTH = 32, 64  # the tiny checkpoint's own length as blocks, two of them
TEXTS = [" ".join(f"w{(7 * i) % 50}" for i in range(90)), "w1 w2 w3", ""]

READER = BLOCK_PACKAGE + textwrap.dedent(
    """
    import json

    import torch
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    case = json.load(open("case.json"))
    for folder in case["folders"]:
        tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
        model = AutoModelForMaskedLM.from_pretrained(folder, trust_remote_code=True).eval()
        encoded = tokenizer(case["texts"], padding=True, truncation=True, return_tensors="pt")
        with torch.no_grad():
            logits = model(**encoded).logits
        torch.save({"input_ids": encoded["input_ids"], "logits": logits}, f"{folder}/read.pt")
        print("read", folder, type(tokenizer).__module__)
    assert not any(name.startswith("hf_effattn") for name in sys.modules)
    """
)


def save_pretrained_framed(folder) -> None:
    """A block model with the tokenizer that ``run_mlm.py --block_special_tokens`` saves beside it."""
    torch.manual_seed(0)
    model = hf_effattn.EffAttnRobertaForMaskedLM.from_pretrained(tiny_text_checkpoint(), attention_type="kerformer",
                                                                 local_block=BLOCK, max_length=LENGTH)
    model.save_pretrained(folder)
    tokenizer = tiny_tokenizer()
    tokenizer.model_max_length = LENGTH  # sized to the model, as the script saves it
    EffAttnBlockTokenizer.from_tokenizer(tokenizer, BLOCK).save_pretrained(folder)


def package_outputs(folder) -> dict:
    """The package's reading of :data:`TEXTS`: ``tokenize_in_blocks`` with the plain tokenizer, our model class."""
    encoded = tokenize_in_blocks(tiny_tokenizer(), TEXTS, block=BLOCK, max_length=LENGTH, padding=True,
                                 return_tensors="pt")
    model = hf_effattn.EffAttnRobertaForMaskedLM.from_pretrained(folder).eval()
    with torch.no_grad():
        return {"input_ids": encoded["input_ids"], "logits": model(**encoded).logits}


def test_a_framed_folder_and_its_conversion_read_as_the_package_reads_them_without_it(tmp_path):
    save_pretrained_framed(tmp_path / "pretrained")
    hf_effattn.convert(str(tmp_path / "pretrained"), "dba", tmp_path / "converted", local_block=BLOCK,
                       task="masked-lm", convert_attention=True)
    folders = ["pretrained", "converted"]
    for folder in folders:
        config = json.loads((tmp_path / folder / "tokenizer_config.json").read_text())
        assert (config["block"], config["auto_map"]["AutoTokenizer"][0]) == (
            BLOCK, "tokenization_effattn.EffAttnBlockTokenizer")
        assert (tmp_path / folder / "tokenization_effattn.py").is_file()
    card = (tmp_path / "converted" / "README.md").read_text()  # the two lines, as the subprocess runs them
    assert 'processor = AutoTokenizer.from_pretrained("converted", trust_remote_code=True)\n' \
           'model = AutoModelForMaskedLM.from_pretrained("converted", trust_remote_code=True)\n' in card
    assert "tokenize_in_blocks(processor, texts, block=32, ...)` gives the same" in card
    (tmp_path / "case.json").write_text(json.dumps({"folders": folders, "texts": TEXTS}))

    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env |= {"HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf_home"), "OMP_NUM_THREADS": "1"}
    result = subprocess.run([sys.executable, "-I", "-c", READER], cwd=tmp_path, env=env, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.count("transformers_modules.") == 2, result.stdout
    for folder in folders:
        read, expected = torch.load(tmp_path / folder / "read.pt"), package_outputs(tmp_path / folder)
        assert read["input_ids"].shape == (3, LENGTH)  # the long text cut to two framed blocks
        torch.testing.assert_close(read["input_ids"], expected["input_ids"], rtol=0, atol=0)
        torch.testing.assert_close(read["logits"], expected["logits"], rtol=1e-5, atol=1e-5)


def test_a_conversion_to_other_blocks_saves_the_tokenizer_unframed_and_says_so(tmp_path, caplog):
    save_pretrained_framed(tmp_path / "pretrained")
    with caplog.at_level(logging.WARNING, logger="hf_effattn.block_tokens"):
        unframed = framed_as_saved(str(tmp_path / "pretrained"), tiny_tokenizer(), None)
    assert type(unframed) is type(tiny_tokenizer())
    assert f"frames blocks of {BLOCK} tokens, which the converted model (local_block=None) does not read: its " \
           f"tokenizer is saved unframed. Convert with --local_block {BLOCK} to keep the framing." in caplog.text
    assert framed_as_saved(tiny_text_checkpoint(), tiny_tokenizer(), BLOCK) is not None  # a plain source: as it is
    assert type(framed_as_saved(tiny_text_checkpoint(), tiny_tokenizer(), BLOCK)) is type(tiny_tokenizer())
