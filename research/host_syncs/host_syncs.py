#!/usr/bin/env python
"""Count the host-device synchronisations of one training step of every mechanism, on CUDA.

Each registered mechanism, alone and beside a 128-token window (``<name>+w128``), runs a 2-layer encoder (hidden
256, 4 heads) on a batch of 2 x 1,024 token ids, once with an all-ones attention mask and once with the second
sequence padded; after a warm-up step, one forward and backward runs under ``torch.cuda.set_sync_debug_mode("warn")``,
which warns at every operation that makes the host wait for the GPU. The warnings are counted by the line that
caused them. A synchronisation stalls the host's queue of kernel launches, which matters most where the GPU waits on
launches (short inputs, small batches).

    python research/host_syncs/host_syncs.py   # on a CUDA machine; writes research/host_syncs/results.json
"""

from __future__ import annotations

import collections
import json
import sys
import warnings
from pathlib import Path

import torch

from hf_effattn import EffAttnRobertaConfig, EffAttnRobertaModel
from hf_effattn.modeling.attentions import list_attentions

RESULT = Path(__file__).resolve().parent / "results.json"
WINDOW, LENGTH, PADDED_FROM = 128, 1024, 900
UNWINDOWED = ("eager", "sdpa", "local")  # softmax takes no window; local is the window


def model_of(name: str) -> EffAttnRobertaModel:
    """A 2-layer encoder on CUDA running ``name`` (``<mechanism>+w128``: beside the window)."""
    mechanism, _, window = name.partition("+w")
    settings = {"local_window": int(window or WINDOW)} if window or mechanism == "local" else {}
    config = EffAttnRobertaConfig(attention_type=mechanism, attention_config=settings, hidden_size=256,
                                  num_attention_heads=4, intermediate_size=512, num_hidden_layers=2,
                                  max_position_embeddings=2 * LENGTH)
    with torch.device("cuda"):
        return EffAttnRobertaModel(config, add_pooling_layer=False)


def synchronisations(model, input_ids, attention_mask) -> dict[str, int]:
    """The synchronisations of one forward and backward (after a warm-up one), by the line that caused them."""
    def step():
        model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state.sum().backward()

    step()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            step()
        finally:
            torch.cuda.set_sync_debug_mode(0)
    return dict(collections.Counter(f"{Path(w.filename).parent.name}/{Path(w.filename).name}:{w.lineno}"
                                    for w in caught))


def main() -> None:
    if not torch.cuda.is_available():
        sys.exit("error: counting host-device synchronisations needs a CUDA GPU; run this on a machine with one")
    names = list_attentions() + [f"{name}+w{WINDOW}" for name in list_attentions() if name not in UNWINDOWED]
    input_ids = torch.randint(3, 1000, (2, LENGTH), device="cuda")
    masks = {"unpadded": torch.ones_like(input_ids), "padded": torch.ones_like(input_ids)}
    masks["padded"][1, PADDED_FROM:] = 0
    torch.cuda.set_sync_debug_mode(0)  # its own first call initialises CUDA, a synchronisation of its own
    results = {}
    for name in names:
        model = model_of(name)
        results[name] = {kind: synchronisations(model, input_ids, mask) for kind, mask in masks.items()}
        print(f"{name:22s} " + "  ".join(f"{kind}: {sum(places.values())} {places or ''}"
                                          for kind, places in results[name].items()), flush=True)
    RESULT.write_text(json.dumps({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                                  "synchronisations": results}, indent=1) + "\n")
    print(f"Wrote {RESULT}")


if __name__ == "__main__":
    main()
