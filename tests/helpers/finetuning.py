"""Tiny local stand-ins for the Hub objects the fine-tuning code loads, built with the real classes.

* checkpoints: a RoBERTa (``RobertaForMaskedLM``, as ``FacebookAI/roberta-base``) with a word-level fast
  tokenizer, and a ViT (``ViTModel``) with a ``ViTImageProcessor``; hidden size 32, two layers;
* datasets: folders laid out as the Hub repositories are (``<config>/<split>-00000-of-00001.parquet`` plus a
  README whose YAML declares the configs), in each dataset's own schema (column names, ``ClassLabel``s,
  GLUE's ``idx`` and unlabeled test splits), so that ``load_dataset(folder, config)`` takes the same path
  as ``load_dataset("nyu-mll/glue", "sst2")``.

Builders are cached per process: every test module shares one copy.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import importlib.util
import random
import shutil
import tempfile
from pathlib import Path

import pytest
import torch

from hf_effattn.finetuning.synthetic import build_word_tokenizer, save_random_roberta, task_vocabulary

REPO = Path(__file__).resolve().parents[2]
WORK = Path(tempfile.mkdtemp(prefix="hf_effattn_finetune_tests_"))
atexit.register(shutil.rmtree, WORK, ignore_errors=True)

MAX_LENGTH = 32
NUM_WORDS = 40
GLUE_SCHEMAS = {
    "cola": (("sentence",), ["unacceptable", "acceptable"]),
    "sst2": (("sentence",), ["negative", "positive"]),
    "mrpc": (("sentence1", "sentence2"), ["not_equivalent", "equivalent"]),
    "qqp": (("question1", "question2"), ["not_duplicate", "duplicate"]),
    "stsb": (("sentence1", "sentence2"), None),
    "mnli": (("premise", "hypothesis"), ["entailment", "neutral", "contradiction"]),
    "qnli": (("question", "sentence"), ["entailment", "not_entailment"]),
    "rte": (("sentence1", "sentence2"), ["entailment", "not_entailment"]),
    "wnli": (("sentence1", "sentence2"), ["not_entailment", "entailment"]),
}
CIFAR10_NAMES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]


def sentence(rng: random.Random, label: int = 0) -> str:
    """A few task words; the label's marker word makes the task learnable."""
    words = [f"w{rng.randrange(NUM_WORDS)}" for _ in range(rng.randint(4, 12))]
    words.insert(rng.randrange(len(words)), f"a{label % 4}")
    return " ".join(words)


def paragraph(rng: random.Random) -> str:
    """3 to 24 of the tiny vocabulary's words."""
    return " ".join(f"w{rng.randrange(NUM_WORDS)}" for _ in range(rng.randint(3, 24)))


def text_file(folder: Path, lines: list[str], name: str = "train.txt") -> str:
    """``lines`` written to ``folder/name``, one a line; its path."""
    path = folder / name
    path.write_text("\n".join(lines) + "\n")
    return str(path)


@pytest.fixture(autouse=True)
def one_torch_thread():
    """Train the tiny models on one thread (no spinning worker threads on a busy machine); restore afterwards.
    Test modules that train import it, which makes it apply to their tests."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def tiny_tokenizer():
    return build_word_tokenizer(task_vocabulary(NUM_WORDS), MAX_LENGTH)


@contextlib.contextmanager
def without_progress_bars():
    """Transformers' progress bars off inside the block: a tiny checkpoint saved on its first use in a test prints
    nothing into the output that test reads."""
    from transformers.utils import logging

    shown = logging.is_progress_bar_enabled()
    logging.disable_progress_bar()
    try:
        yield
    finally:
        if shown:
            logging.enable_progress_bar()


@functools.cache
def tiny_text_checkpoint(dropout: float = 0.0) -> str:
    """A RoBERTa masked-LM checkpoint (hidden 32, 2 layers, 4 heads) with its tokenizer."""
    with without_progress_bars():
        return str(save_random_roberta(WORK / f"tiny-roberta-dropout{dropout}", tiny_tokenizer(), 32, dropout))


@functools.cache
def tiny_vit_checkpoint(with_processor: bool = True) -> str:
    """A ViT checkpoint (16x16 images, 4x4 patches, hidden 32, 2 layers) with, optionally, its image processor."""
    from transformers import ViTConfig, ViTImageProcessor, ViTModel

    folder = WORK / f"tiny-vit-processor{with_processor}"
    config = ViTConfig(image_size=16, patch_size=4, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                       intermediate_size=64, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    with without_progress_bars():
        ViTModel(config, add_pooling_layer=False).save_pretrained(folder)
    if with_processor:
        ViTImageProcessor(size={"height": 16, "width": 16}).save_pretrained(folder)
    return str(folder)


def write_hub_mirror(folder: Path, configs: dict, default: str | None = None) -> str:
    """Write ``{config: DatasetDict}`` as a Hub dataset repository would hold it; return the folder."""
    lines = ["---", "configs:"]
    for config, splits in configs.items():
        lines.append(f"- config_name: {config}")
        if config == default:
            lines.append("  default: true")
        lines.append("  data_files:")
        for split, rows in splits.items():
            (folder / config).mkdir(parents=True, exist_ok=True)
            rows.to_parquet(folder / config / f"{split}-00000-of-00001.parquet")
            lines += [f"  - split: {split}", f"    path: {config}/{split}-*"]
    (folder / "README.md").write_text("\n".join([*lines, "---", ""]))
    return str(folder)


def glue_split(task: str, size: int, labeled: bool, seed: int):
    """Rows of a GLUE task in ``nyu-mll/glue``'s schema (test splits carry label -1, as on the Hub)."""
    from datasets import ClassLabel, Dataset, Features, Value

    columns, names = GLUE_SCHEMAS[task]
    rng = random.Random(seed)
    labels = [(rng.uniform(0, 5) if names is None else rng.randrange(len(names))) if labeled else -1
              for _ in range(size)]
    rows = {column: [sentence(rng, int(label)) for label in labels] for column in columns}
    features = {column: Value("string") for column in columns}
    features["label"] = Value("float32") if names is None else ClassLabel(names=names)
    features["idx"] = Value("int32")
    return Dataset.from_dict({**rows, "label": labels, "idx": list(range(size))}, features=Features(features))


@functools.cache
def glue_mirror(train_size: int = 32, eval_size: int = 16) -> str:
    """A local ``nyu-mll/glue`` with all nine tasks and their splits."""
    configs = {}
    for number, task in enumerate(GLUE_SCHEMAS):
        evals = ("validation_matched", "validation_mismatched") if task == "mnli" else ("validation",)
        tests = ("test_matched", "test_mismatched") if task == "mnli" else ("test",)
        splits = {"train": glue_split(task, train_size, True, seed=100 * number)}
        splits.update({name: glue_split(task, eval_size, True, seed=100 * number + 1 + i)
                       for i, name in enumerate(evals)})
        splits.update({name: glue_split(task, 4, False, seed=100 * number + 9) for name in tests})
        configs[task] = splits
    return write_hub_mirror(WORK / f"glue-{train_size}", configs)


@functools.cache
def imdb_mirror() -> str:
    """A local ``stanfordnlp/imdb``: ``text``, ``label`` (neg/pos); train, test, unsupervised (label -1)."""
    from datasets import ClassLabel, Dataset, Features, Value

    features = Features({"text": Value("string"), "label": ClassLabel(names=["neg", "pos"])})

    def split(size: int, seed: int, labeled: bool = True):
        rng = random.Random(seed)
        labels = [rng.randrange(2) if labeled else -1 for _ in range(size)]
        return Dataset.from_dict({"text": [sentence(rng, max(label, 0)) for label in labels], "label": labels},
                                 features=features)

    splits = {"train": split(32, 1), "test": split(16, 2), "unsupervised": split(8, 3, labeled=False)}
    return write_hub_mirror(WORK / "imdb", {"plain_text": splits}, default="plain_text")


@functools.cache
def amazon_polarity_mirror() -> str:
    """A local ``fancyzhx/amazon_polarity``: ``label`` (negative/positive), ``title``, ``content``; train, test."""
    from datasets import ClassLabel, Dataset, Features, Value

    features = Features({"label": ClassLabel(names=["negative", "positive"]), "title": Value("string"),
                         "content": Value("string")})

    def split(size: int, seed: int):
        rng = random.Random(seed)
        labels = [rng.randrange(2) for _ in range(size)]
        return Dataset.from_dict({"label": labels, "title": [sentence(rng, label) for label in labels],
                                  "content": [sentence(rng) for _ in labels]}, features=features)

    return write_hub_mirror(WORK / "amazon_polarity", {"amazon_polarity": {"train": split(32, 1),
                                                                             "test": split(16, 2)}},
                            default="amazon_polarity")


def tiny_images(size: int, num_classes: int, seed: int, image_size: int = 20):
    """``size`` small RGB PIL images whose mean colour depends on the class, and their labels."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(seed)
    labels = rng.integers(0, num_classes, size).tolist()
    images = [Image.fromarray(np.clip(rng.normal(255 * label / num_classes, 40, (image_size, image_size, 3)), 0,
                                      255).astype("uint8")) for label in labels]
    return images, labels


@functools.cache
def cifar_mirror(num_classes: int) -> str:
    """A local ``uoft-cs/cifar10`` (``img``, ``label``) or ``uoft-cs/cifar100`` (``img``, ``fine_label``,
    ``coarse_label``), train and test."""
    from datasets import ClassLabel, Dataset, Features, Image

    def split(size: int, seed: int):
        images, labels = tiny_images(size, num_classes, seed)
        if num_classes == 10:
            features = Features({"img": Image(), "label": ClassLabel(names=CIFAR10_NAMES)})
            return Dataset.from_dict({"img": images, "label": labels}, features=features)
        features = Features({"img": Image(), "fine_label": ClassLabel(names=[f"fine_{i}" for i in range(100)]),
                             "coarse_label": ClassLabel(names=[f"coarse_{i}" for i in range(20)])})
        return Dataset.from_dict({"img": images, "fine_label": labels, "coarse_label": [l // 5 for l in labels]},
                                 features=features)

    config = "plain_text" if num_classes == 10 else "cifar100"
    return write_hub_mirror(WORK / f"cifar{num_classes}", {config: {"train": split(24, 1), "test": split(12, 2)}},
                            default=config)


def training_options(output_dir, **overrides) -> list[str]:
    """Command-line options of a short, tiny run; ``overrides`` replace or add options (``None`` drops a flag)."""
    options = {"output_dir": str(output_dir), "per_device_train_batch_size": 8, "per_device_eval_batch_size": 8,
               "learning_rate": 1e-3, "num_train_epochs": 1, "seed": 0}
    options.update(overrides)
    argv = []
    for name, value in options.items():
        if value is False or value is None:
            continue
        argv.append(f"--{name}")
        if value is not True:
            argv.append(str(value))
    return argv


def load_script(name: str):
    """A ``finetune/`` script, imported as a module (its ``main(argv)`` runs in-process)."""
    spec = importlib.util.spec_from_file_location(name, REPO / "finetune" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def contents(folder) -> dict[str, str]:
    """Every file under ``folder`` (hidden ones too) -> the SHA-256 of its bytes: two equal results mean byte-for-byte
    equal folders."""
    import hashlib

    return {str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(Path(folder).rglob("*")) if path.is_file()}


def saved_weights(folder) -> dict:
    """The tensors of ``folder/model.safetensors``."""
    from safetensors.torch import load_file

    return load_file(str(Path(folder) / "model.safetensors"))


def assert_same_weights(folder_a, folder_b) -> None:
    """The two folders' saved weights are the same tensors, bit for bit, under the same names."""
    weights_a, weights_b = saved_weights(folder_a), saved_weights(folder_b)
    assert weights_a.keys() == weights_b.keys()
    for name in weights_a:
        assert torch.equal(weights_a[name], weights_b[name]), name


def free_port() -> int:
    """A TCP port no process listens on now (the system's choice for port 0)."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def launch_two_cpu_processes(config: str, script: Path, argv: list[str]):
    """``accelerate launch`` of ``script argv`` as two CPU processes (gloo) with ``configs/<config>.yaml``; returns
    the finished ``subprocess.CompletedProcess`` (output captured). Each launch takes a free port of its own, so
    that launches in parallel test workers, or one just after another, never meet on accelerate's default."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, ACCELERATE_USE_CPU="1", OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1",
               PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    command = [sys.executable, "-m", "accelerate.commands.launch",
               "--config_file", str(REPO / "configs" / f"{config}.yaml"), "--num_processes", "2",
               "--main_process_port", str(free_port()),
               str(script), *argv]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
