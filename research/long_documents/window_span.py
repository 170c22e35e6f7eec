#!/usr/bin/env python
"""Beside a window, should a kernelized mechanism's terms cover every key, or only the keys outside the window?

LoLCATs counts each key once: the window's exact terms for the keys inside it, the mechanism's for the rest
(``KernelAttention.mechanism_outside_window = True``, the default). The alternative adds the mechanism's terms for
every key, the window's keys counted twice. Both are measured here on the same budget: MiniLM with its head
(``pretrain.py``'s ``models/minilm-mlm-512``) converted to Kerformer beside a 128-token window at 2,048 tokens, long
attention transfer (``--steps`` steps, the benchmark's window dropout), then the transfer report's last-hidden-state
cosine and per-layer error, and the held-out masked-LM loss at 2,048 (no masked-LM pretraining). Result:
``results/window_span.json``.

    python research/long_documents/window_span.py --steps 60
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from rows import LONG, ROWS, WINDOW
from runs import DATA, kept, set_threads, write_result


def measure(outside: bool, steps: int) -> dict:
    from transformers import AutoTokenizer

    from hf_effattn import convert
    from hf_effattn.modeling.kernel_attention import KernelAttention
    from heldout import heldout_loss
    from pretrain import HEAD_FOLDER

    KernelAttention.mechanism_outside_window = outside
    row = ROWS[f"kerformer-w{WINDOW}"]
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch) / "model"
        model = convert(str(HEAD_FOLDER), "kerformer", folder, attention_config=row.settings, convert_attention=True,
                        max_length=LONG, transfer={"data": str(DATA / "mlm_train.jsonl"), "max_length": LONG,
                                                   "batch_size": 1, "steps": steps, "learning_rate": 1e-3,
                                                   "window_dropout": row.transfer_window_dropout})
        report = (folder / "attention_transfer.json").read_text()
    import json

    report = json.loads(report)
    loss = heldout_loss(model, AutoTokenizer.from_pretrained(HEAD_FOLDER), LONG)["loss"]
    return {"mechanism_outside_window": outside, "steps": steps, "heldout_loss": loss,
            "hidden_cosine_after": report["hidden_cosine_after"],
            "mse_after": [layer["mse_after"] for layer in report["layers"]],
            "mechanism_weight": [layer["mechanism_weight"] for layer in report["layers"]]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--again", action="store_true", help="measure anew where the result exists")
    args = parser.parse_args()
    if kept("window_span", "kerformer", args.again):
        return
    set_threads(1)
    results = [measure(outside, args.steps) for outside in (True, False)]
    write_result("window_span", "kerformer", {"rows": results})
    for result in results:
        print(f"outside only: {result['mechanism_outside_window']!s:5}  held-out loss {result['heldout_loss']:.3f}  "
              f"hidden cosine {result['hidden_cosine_after']:.4f}")


if __name__ == "__main__":
    main()
