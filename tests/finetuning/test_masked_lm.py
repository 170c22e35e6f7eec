"""``finetune/run_mlm.py``: masked-LM continued pretraining on the fine-tuning loop.

A run saves checkpoints, pauses, resumes to exactly the weights of an uninterrupted run (dropout, gradient
accumulation and per-example masks included), finishes, refuses to be overwritten, and leaves a folder that loads
through remote code with its tokenizer; its perplexity is the exponential of the eval loss recomputed here; the
real MiniLM, which has no masked-LM head, trains a new one (its data and options: ``test_masked_lm_options.py``).
Tiny RoBERTa (32 positions), tiny texts.
"""

import json
import logging
import math
import os
import random
import subprocess
import sys
import textwrap

import pytest
import torch
from helpers.finetuning import one_torch_thread  # noqa: F401 (autouse: one torch thread)
from helpers.finetuning import (
    NUM_WORDS,
    WORK,
    assert_same_weights,
    load_script,
    paragraph,
    text_file,
    tiny_text_checkpoint,
    tiny_tokenizer,
    training_options,
    write_hub_mirror,
)
from helpers.models import BLOCK_PACKAGE, MINILM

from hf_effattn import EffAttnRobertaForMaskedLM
from hf_effattn.finetuning.checkpoints import latest_checkpoint
from hf_effattn.finetuning.data import example_generator
from hf_effattn.options.user_errors import run_script

BLOCK = 16  # tokens per example


def wikitext_split(size: int, seed: int):
    """Rows in ``wikitext``'s schema: one ``text`` column of paragraphs, headings and blank lines."""
    from datasets import Dataset, Features, Value

    rng = random.Random(seed)
    rows = []
    for number in range(size):
        rows += ["", f" = w{number % NUM_WORDS} = ", ""] if number % 5 == 0 else [paragraph(rng)]
    return Dataset.from_dict({"text": rows}, features=Features({"text": Value("string")}))


@pytest.fixture(scope="module")
def wikitext_mirror():
    """A local ``wikitext`` with the configuration ``wikitext-2-raw-v1``: train, validation and test."""
    splits = {"train": wikitext_split(40, 1), "validation": wikitext_split(10, 2), "test": wikitext_split(5, 3)}
    return write_hub_mirror(WORK / "wikitext", {"wikitext-2-raw-v1": splits})


def mlm_argv(output_dir, dataset, **overrides) -> list[str]:
    """A run on the wikitext mirror (or other ``dataset`` options): blocks of 16 tokens, 4 per batch, 2 batches per
    optimizer step, dropout 0.1, two epochs, a checkpoint every 2 steps."""
    return [
        "--model_name_or_path", tiny_text_checkpoint(dropout=0.1), "--attention_type", "singularformer",
        *dataset, "--max_seq_length", str(BLOCK),
        *training_options(output_dir, **{"per_device_train_batch_size": 4, "gradient_accumulation_steps": 2,
                                         "num_train_epochs": 2, "checkpointing_steps": 2, **overrides}),
    ]


def run_mlm(output_dir, dataset, **overrides):
    return load_script("run_mlm").main(mlm_argv(output_dir, dataset, **overrides))


def wikitext_options(mirror) -> list[str]:
    return ["--dataset_name", mirror, "--dataset_config_name", "wikitext-2-raw-v1"]


@pytest.fixture(scope="module")
def finished_run(wikitext_mirror, tmp_path_factory):
    folder = tmp_path_factory.mktemp("finished")
    outcome = run_mlm(folder, wikitext_options(wikitext_mirror))
    return folder, outcome


def test_a_paused_run_resumed_with_loader_workers_ends_as_an_uninterrupted_one(finished_run, wikitext_mirror,
                                                                                 tmp_path, caplog):
    reference_folder, reference = finished_run
    assert reference.finished and len(reference.state.history) == 2
    steps = reference.max_steps
    assert steps % 2 == 0 and steps > 4
    options = wikitext_options(wikitext_mirror)
    stop = steps // 2 + 1  # in the second epoch, at a step with no regular checkpoint
    with caplog.at_level(logging.INFO, logger="hf_effattn.finetuning.run"):
        paused = run_mlm(tmp_path, options, stop_after_steps=stop)
    assert not paused.finished and latest_checkpoint(tmp_path).name == f"step_{stop}"
    assert (f"Paused at step {stop} of {steps} (--stop_after_steps): continue with the same options and "
            "--resume_from_checkpoint latest.") in caplog.messages
    assert not (tmp_path / "model.safetensors").exists()
    # Loader workers mask in other processes: the masks (and so the weights) must not change.
    resumed = run_mlm(tmp_path, options, resume_from_checkpoint="latest", dataloader_num_workers=2)
    assert resumed.finished
    assert_same_weights(reference_folder, tmp_path)
    assert resumed.state.history == reference.state.history  # a resumed epoch's train_loss is the whole epoch's


def test_a_finished_run_is_not_replaced_without_overwrite_output_dir(finished_run, wikitext_mirror):
    folder, _ = finished_run
    before = {path: path.read_bytes() for path in folder.rglob("*") if path.is_file()}
    with pytest.raises(ValueError, match="holds a finished run .*: pass --overwrite_output_dir to replace it"):
        run_mlm(folder, wikitext_options(wikitext_mirror), learning_rate=2e-3)
    assert {path: path.read_bytes() for path in folder.rglob("*") if path.is_file()} == before


def masked_blocks(tokenizer, texts: list[str], seed: int) -> list[dict]:
    """The evaluation blocks, built here: the non-blank texts tokenised, concatenated, cut into blocks of ``BLOCK``
    tokens, and masked by Transformers' collator with each block's own generator (epoch 0)."""
    from transformers import DataCollatorForLanguageModeling

    encoded = tokenizer([text for text in texts if text.strip()], return_special_tokens_mask=True)
    ids = [token for row in encoded["input_ids"] for token in row]
    special = [flag for row in encoded["special_tokens_mask"] for flag in row]
    masker = DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.15)
    blocks = []
    for index, start in enumerate(range(0, len(ids) // BLOCK * BLOCK, BLOCK)):
        masker.generator = example_generator(seed, 0, index)
        inputs, labels = masker.torch_mask_tokens(torch.tensor([ids[start:start + BLOCK]]),
                                                  torch.tensor([special[start:start + BLOCK]]).bool())
        blocks.append({"input_ids": inputs, "labels": labels})
    return blocks


def test_perplexity_is_the_exponential_of_the_mean_loss_over_masked_tokens(finished_run):
    folder, outcome = finished_run
    results = json.loads((folder / "all_results.json").read_text())
    assert results["eval"] == outcome.final_metrics
    reported = results["eval"]["validation"]
    model = EffAttnRobertaForMaskedLM.from_pretrained(folder).eval()
    validation = wikitext_split(10, 2)["text"]
    loss_sum, tokens = 0.0, 0
    with torch.no_grad():
        for block in masked_blocks(tiny_tokenizer(), validation, seed=0):
            count = int((block["labels"] != -100).sum())
            if count:  # the model's loss: the mean over the block's masked tokens
                loss_sum += model(**block).loss.item() * count
                tokens += count
    assert tokens > 0
    assert reported["loss"] == pytest.approx(loss_sum / tokens, rel=1e-5)
    assert reported["perplexity"] == pytest.approx(math.exp(reported["loss"]), rel=1e-12)
    best = min(entry["eval"]["validation"]["perplexity"] for entry in results["history"])
    assert results["best_metric"] == best
    card = (folder / "README.md").read_text()
    assert "pipeline_tag: fill-mask" in card and f"| validation | perplexity | {reported['perplexity']:.4f} |" in card


REMOTE_LOADER = BLOCK_PACKAGE + textwrap.dedent(
    """
    import torch
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    folder = sys.argv[1]
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForMaskedLM.from_pretrained(folder, trust_remote_code=True).eval()
    assert type(model).__module__.startswith("transformers_modules."), type(model).__module__
    inputs = tokenizer(f"w1 w2 {tokenizer.mask_token} w3", return_tensors="pt")
    with torch.no_grad():
        torch.save({"input_ids": inputs.input_ids, "logits": model(**inputs).logits}, sys.argv[2])
    assert not any(name.startswith("hf_effattn") for name in sys.modules)
    """
)


def test_the_output_folder_loads_as_remote_code_with_its_tokenizer(finished_run, tmp_path):
    folder, _ = finished_run
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env |= {"HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "HF_HOME": str(tmp_path / "hf_home")}
    result = subprocess.run([sys.executable, "-I", "-c", REMOTE_LOADER, str(folder), str(tmp_path / "out.pt")],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    remote = torch.load(tmp_path / "out.pt")
    assert remote["input_ids"].tolist() == [tiny_tokenizer()("w1 w2 <mask> w3")["input_ids"]]
    model = EffAttnRobertaForMaskedLM.from_pretrained(folder).eval()
    with torch.no_grad():
        torch.testing.assert_close(model(remote["input_ids"]).logits, remote["logits"], atol=1e-5, rtol=1e-5)


# -- a checkpoint without a head: the real MiniLM -------------------------------------------------------------------


def minilm_folder() -> str:
    return str(MINILM)


ENGLISH = [
    "The kernel schedules tasks across every processor of the machine.",
    "Memory is handed out in pages, and pages are grouped into zones.",
    "A driver registers its device, then answers the interrupts it raises.",
    "File systems keep their metadata in inodes, one for each file.",
] * 6


def test_minilm_without_a_head_is_refused_in_one_line_then_trains_a_new_head_alone(tmp_path, capsys, monkeypatch):
    train = text_file(tmp_path, ENGLISH)
    data = ["--train_file", train, "--max_seq_length", "32"]
    script = load_script("run_mlm")
    monkeypatch.setattr(sys, "argv", ["run_mlm.py", "--model_name_or_path", minilm_folder(), *data,
                                      "--output_dir", str(tmp_path / "refused")])
    with pytest.raises(SystemExit) as exit_status:
        run_script(script.main)  # as `python finetune/run_mlm.py ...` runs
    assert exit_status.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error == (f"run_mlm.py: error: {minilm_folder()} has no masked-LM head (it lacks lm_head.bias, "
                     "lm_head.decoder.bias, lm_head.dense.bias, lm_head.dense.weight, lm_head.layer_norm.bias, "
                     "lm_head.layer_norm.weight): pass --new_mlm_head to initialise one (its decoder tied to the "
                     "word embeddings), best trained first alone with --train_head_only.")
    assert not (tmp_path / "refused" / "checkpoints").exists()
    monkeypatch.setattr(sys, "argv", ["run_mlm.py", "--model_name_or_path", minilm_folder(), "--max_seq_length", "x"])
    with pytest.raises(SystemExit) as exit_status:
        run_script(script.main)
    assert exit_status.value.code == 2
    assert capsys.readouterr().err == ("run_mlm.py: error: argument --max_seq_length: expected an integer >= 1, got "
                                       "'x' (see run_mlm.py --help)\n")

    outcome = load_script("run_mlm").main([
        "--model_name_or_path", minilm_folder(), "--new_mlm_head", "--train_head_only", *data,
        *training_options(tmp_path / "head", max_train_steps=2, per_device_train_batch_size=2, learning_rate=1e-2)])
    assert outcome.finished
    original = EffAttnRobertaForMaskedLM.from_pretrained(minilm_folder())
    trained = EffAttnRobertaForMaskedLM.from_pretrained(tmp_path / "head")
    assert trained.lm_head.decoder.weight is trained.roberta.embeddings.word_embeddings.weight  # tied
    for name, parameter in trained.roberta.state_dict().items():
        assert torch.equal(parameter, original.roberta.state_dict()[name]), name  # the encoder is frozen
    assert (tmp_path / "head" / "vocab.txt").exists() or (tmp_path / "head" / "tokenizer.json").exists()
