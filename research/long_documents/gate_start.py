#!/usr/bin/env python
"""Where the gate starts: a block hybrid's masked-LM loss before any training, against the chunked reader's.

MiniLM with its head (``pretrain.py``'s ``models/minilm-mlm-512``) extended to 2,048 tokens with aligned blocks of
512 beside each seed mechanism, read framed ([CLS]/[SEP] at every block's edges, ``hf_effattn.block_tokens``), for
initial gates ``sigma`` (each head's weight on the mechanism's memory, ``initial_mechanism_weight``) from 0.1 down
to 1e-6: the held-out loss of ``pretrain.py`` against the chunked reader's (MiniLM over each 512-token chunk,
row ``sdpa-512``, which the blocks alone reproduce exactly). The default gate is the largest that keeps the converted
model within 0.01 nats of the chunks (the issue's target): as much memory at the start as keeps it the chunked
reader. Result: ``results/gate_start/<mechanism>.json`` and the table ``results/gate_start.md``.

    python research/long_documents/gate_start.py
"""

from __future__ import annotations

import argparse

from rows import BLOCK, LONG, MECHANISMS, ROWS
from runs import default_device, kept, read_result, set_threads, write_result
from table_files import markdown_table, table_rows

KIND = "gate_start"
GATES = (1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6)
TOLERANCE = 0.01  # nats: the converted model "is" the chunked reader within this


def loss_at(mechanism: str, gate: float | None) -> float:
    """The framed held-out loss at 2,048 of ``mechanism`` beside blocks of 512 with the gate starting at ``gate``
    (None: the blocks alone, ``local``); the other settings those of the mechanism's block row (``rows.blocks``)."""
    from transformers import AutoTokenizer

    from hf_effattn import EffAttnRobertaForMaskedLM
    from heldout import heldout_loss
    from pretrain import HEAD_FOLDER

    settings = ROWS[f"{mechanism}-b{BLOCK}"].settings
    settings = settings if gate is None else {**settings, "initial_mechanism_weight": gate}
    model = EffAttnRobertaForMaskedLM.from_pretrained(HEAD_FOLDER, attention_type=mechanism, convert_attention=True,
                                                      attention_config=settings, max_length=LONG)
    return heldout_loss(model.to(default_device()), AutoTokenizer.from_pretrained(HEAD_FOLDER), LONG, BLOCK)["loss"]


def rows() -> list[list]:
    """The chunked reader's loss, then each mechanism's loss at each gate minus it."""
    chunks = read_result(KIND, "local")
    if chunks is None:
        return []
    measured = [(mechanism, read_result(KIND, mechanism)) for mechanism in MECHANISMS]
    return [["local", chunks["loss"]]] + [[mechanism, *[f"{loss - chunks['loss']:+.4f}" for loss in result["losses"]]]
                                          for mechanism, result in measured if result]


def table() -> str:
    header = ["mechanism", *[f"sigma = {gate:g}" for gate in GATES]]
    measured = table_rows(KIND, rows)
    if not measured:
        return "Where the gate starts (`gate_start.py`): not run."
    (_, chunks), *differences = measured
    return (f"Loss before any training minus the chunked reader's ({chunks:.4f} nats), framed blocks of "
            f"{BLOCK} at {LONG:,} tokens:\n\n" + markdown_table(header, differences))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--again", action="store_true", help="measure anew where a result exists")
    args = parser.parse_args()
    set_threads(1)
    if not kept(KIND, "local", args.again):
        write_result(KIND, "local", {"loss": loss_at("local", None)})
    for mechanism in MECHANISMS:
        if not kept(KIND, mechanism, args.again):
            losses = [loss_at(mechanism, gate) for gate in GATES]
            write_result(KIND, mechanism, {"gates": list(GATES), "losses": losses})
            print(f"{mechanism}: " + " ".join(f"{gate:g}: {loss:.4f}" for gate, loss in zip(GATES, losses)))
    print(table())


if __name__ == "__main__":
    main()
