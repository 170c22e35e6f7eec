"""``hf-effattn demo``: the whole workflow offline, on a task generated in code.

1. Generate the "majority of markers" task (:mod:`hf_effattn.finetuning.synthetic`) as local json files, a
   word-level tokenizer, and a small randomly initialised RoBERTa checkpoint (hidden 64, 2 layers), saved
   with the Transformers classes as a real checkpoint would be.
2. Fine-tune it twice with the fine-tuning script's own code (``hf_effattn.finetuning.text_classification``):
   with the chosen mechanism (``--attention``, default kerformer) and with the exact softmax baseline (sdpa).
3. Print both accuracies; the chosen mechanism's run leaves a Hub-ready folder in ``--output_dir``.
4. Reload that folder in a fresh Python process where hf_effattn cannot be imported, through
   ``AutoModelForSequenceClassification.from_pretrained(folder, trust_remote_code=True)`` with
   ``HF_HUB_OFFLINE=1``, and check that its predictions equal those of the model in this process.

The default run takes a minute or two on a CPU; ``--quick`` takes seconds (a smoke test).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ..options.parser_values import ATTENTIONS

NUM_FILLERS = 100

# Runs in the fresh process: hf_effattn is made unimportable, so only the folder's remote code can serve.
RELOAD_SCRIPT = """
import json, sys
sys.modules["hf_effattn"] = None
import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer
folder, texts_file, logits_file = sys.argv[1:]
texts = json.loads(open(texts_file).read())
tokenizer = AutoTokenizer.from_pretrained(folder)
model = AutoModelForSequenceClassification.from_pretrained(folder, trust_remote_code=True).eval()
if type(model).__module__.split(".")[0] != "transformers_modules":
    raise SystemExit(f"expected the folder's remote code, got {type(model).__module__}")
with torch.no_grad():
    logits = model(**tokenizer(texts, padding=True, return_tensors="pt")).logits
open(logits_file, "w").write(json.dumps(logits.tolist()))
"""


@dataclass(frozen=True)
class DemoSize:
    """How big the demo's task and training are."""

    length: int
    train_examples: int
    eval_examples: int
    epochs: int


FULL = DemoSize(length=128, train_examples=4000, eval_examples=500, epochs=3)
QUICK = DemoSize(length=32, train_examples=96, eval_examples=32, epochs=1)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--attention", default="kerformer", choices=ATTENTIONS,
                        help="The mechanism to demonstrate (default: kerformer).")
    parser.add_argument("--baseline", default="sdpa", choices=ATTENTIONS,
                        help="The mechanism to compare with (default: sdpa, exact softmax attention).")
    parser.add_argument("--output_dir", default="outputs/demo", help="Where the Hub-ready folder goes.")
    parser.add_argument("--overwrite_output_dir", action="store_true",
                        help="Replace the run in --output_dir, e.g. that of an earlier demo (refused otherwise).")
    parser.add_argument("--quick", action="store_true", help="A few steps on a tiny task (a smoke test).")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")


def write_task(folder: Path, size: DemoSize, seed: int) -> dict[str, Path]:
    """The task's train and validation splits as json-lines files."""
    from ..finetuning.synthetic import majority_dataset

    files = {}
    splits = {"train": (size.train_examples, seed), "validation": (size.eval_examples, seed + 1)}
    for split, (count, split_seed) in splits.items():
        files[split] = folder / f"majority-of-markers-{split}.jsonl"
        rows = majority_dataset(count, size.length, NUM_FILLERS, split_seed)
        files[split].write_text("".join(json.dumps(row) + "\n" for row in rows))
    return files


def write_base_checkpoint(folder: Path, size: DemoSize) -> Path:
    """A randomly initialised RoBERTa checkpoint (hidden 64) with the task's tokenizer (``<s>`` text ``</s>``)."""
    from ..finetuning.synthetic import build_word_tokenizer, save_random_roberta, task_vocabulary

    return save_random_roberta(folder, build_word_tokenizer(task_vocabulary(NUM_FILLERS), size.length + 2), 64)


def finetune_argv(base: Path, files: dict[str, Path], mechanism: str, output_dir: Path, size: DemoSize,
                  seed: int, overwrite: bool = False) -> list[str]:
    """The fine-tuning script's options for one of the demo's runs (``overwrite``: replace a run in ``output_dir``)."""
    return ["--overwrite_output_dir"] * overwrite + [
        "--model_name_or_path", str(base), "--attention_type", mechanism,
        "--train_file", str(files["train"]), "--validation_file", str(files["validation"]),
        "--max_length", str(size.length + 2), "--per_device_train_batch_size", "32",
        "--per_device_eval_batch_size", "64", "--learning_rate", "1e-3", "--num_train_epochs", str(size.epochs),
        "--num_warmup_steps", "10", "--seed", str(seed), "--output_dir", str(output_dir),
    ]


def train(argv: list[str]) -> tuple[float, float]:
    """Run the fine-tuning script's ``main``; the validation accuracy and the seconds it took."""
    from ..finetuning.text_classification import main

    start = time.perf_counter()
    outcome = main(argv)
    return outcome.final_metrics["validation"]["accuracy"], time.perf_counter() - start


def local_logits(folder: Path, texts: list[str]):
    """Logits of the saved model loaded in this process (hf_effattn's registered Auto classes)."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForSequenceClassification.from_pretrained(folder).eval()
    with torch.no_grad():
        return model(**tokenizer(texts, padding=True, return_tensors="pt")).logits


def remote_code_logits(folder: Path, texts: list[str], work: Path):
    """Logits of the saved model loaded with ``trust_remote_code=True`` in a fresh process without hf_effattn."""
    import torch

    texts_file, logits_file = work / "texts.json", work / "logits.json"
    texts_file.write_text(json.dumps(texts))
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_MODULES_CACHE=str(work / "modules"), TRANSFORMERS_VERBOSITY="error")
    result = subprocess.run([sys.executable, "-I", "-c", RELOAD_SCRIPT, str(folder.resolve()), str(texts_file),
                             str(logits_file)], env=env, capture_output=True, text=True, cwd=work)
    if result.returncode:
        raise RuntimeError(f"Reloading {folder} with trust_remote_code failed:\n{result.stderr[-3000:]}")
    return torch.tensor(json.loads(logits_file.read_text()))


def quiet_libraries() -> None:
    """Keep the console to the progress bars and the demo's own report."""
    import logging

    import datasets
    import transformers

    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("hf_effattn.modeling").setLevel(logging.ERROR)  # the expected "new parameters" notes
    datasets.disable_progress_bars()
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()


def run(args: argparse.Namespace) -> int:
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    from ..folders.output_folders import check_output_folder

    quiet_libraries()
    size = QUICK if args.quick else FULL
    output_dir = Path(args.output_dir)
    # Before anything trains, as a command that never continues a run (the demo has no --resume_from_checkpoint); the
    # fine-tuning run checks it again, against its inputs, all made by the demo.
    check_output_folder(output_dir, [], args.overwrite_output_dir)
    mechanisms = list(dict.fromkeys([args.attention, args.baseline]))
    print(f"Task: majority of markers. Three marker words (a0-a3 or b0-b3) hide among {size.length} random words; "
          f"the label is the group with two or three of them.\n{size.train_examples} training and "
          f"{size.eval_examples} validation examples, a RoBERTa-style encoder (hidden 64, 2 layers), "
          f"{size.epochs} epoch(s).\n")
    with tempfile.TemporaryDirectory(prefix="hf_effattn_demo_") as scratch:
        work = Path(scratch)
        files = write_task(work, size, args.seed)
        base = write_base_checkpoint(work / "tiny-roberta-random-init", size)
        results = {}
        for mechanism in mechanisms:
            print(f"Fine-tuning with {mechanism} attention")
            destination = output_dir if mechanism == args.attention else work / f"baseline-{mechanism}"
            results[mechanism] = train(finetune_argv(base, files, mechanism, destination, size, args.seed,
                                                     args.overwrite_output_dir))
        print("\n  attention        validation accuracy   fine-tuning time")
        for mechanism, (accuracy, seconds) in results.items():
            print(f"  {mechanism:<16} {accuracy:>19.3f} {seconds:>16.0f} s")
        texts = [json.loads(line)["text"] for line in files["validation"].read_text().splitlines()]
        expected, reloaded = local_logits(output_dir, texts), remote_code_logits(output_dir, texts, work)
    same = int((expected.argmax(-1) == reloaded.argmax(-1)).sum())
    difference = (expected - reloaded).abs().max().item()
    print(f"\nHub-ready folder: {output_dir} (model.safetensors, config.json with auto_map, remote code, tokenizer, "
          f"README.md model card).")
    print(f"Reloaded with AutoModelForSequenceClassification.from_pretrained(folder, trust_remote_code=True) in a "
          f"fresh process without hf_effattn: {same}/{len(texts)} predictions identical, max |logit difference| "
          f"{difference:.1e}.")
    return 0 if same == len(texts) and difference < 1e-4 else 1
