#!/usr/bin/env python
"""The masked-LM loss where only long context helps: masked tokens whose word was last seen outside their chunk.

Longformer's case for long inputs is the masked word that recurs far apart (a term, an identifier). Of the held-out
masked tokens of ``pretrain.py`` (the same 4,880, the same masking), a token is *far* when its word occurs, unmasked,
earlier in its document but not earlier in its own 510-token chunk: a reader of 512-token chunks cannot see that
occurrence; a reader of the whole 2,040 tokens can. The loss on those tokens (and on the others), per token, lets
each reader be compared with the chunks on the very same tokens: the mean difference and its standard error.

Readers: ``sdpa-512`` (MiniLM with its head, in chunks), ``sdpa-512@mlm_512`` (the chunked control, after the same
pretraining), and ``<row>@<stage>`` for a row of ``rows.ROWS`` at a stage of ``pretrain.py`` (``-window-alone``
for a hybrid's window alone). Results: ``results/long_range/<reader>.json``.

    python research/long_documents/long_range.py --readers sdpa-512 sdpa-512@mlm_512 sdpa@mlm kerformer-w128@mlm
"""

from __future__ import annotations

import argparse

from heldout import CONTENT, heldout_windows
from pretrain import HEAD_FOLDER, folder_of
from rows import LONG, ROWS, SHORT
from runs import default_device, measure_each, set_threads

KIND = "long_range"
CHUNK = SHORT - 2


def reader(name: str) -> tuple[str, int, str | None, int | None]:
    """The folder, the reading length, the hybrid part and the framed blocks (or None) of reader ``name``."""
    if name == "sdpa-512":
        return str(HEAD_FOLDER), SHORT, None, None
    if name == "sdpa-512@mlm_512":
        return str(folder_of("sdpa", "mlm_512")), SHORT, None, None
    row, _, stage = name.partition("@")
    stage, _, part = stage.partition("-")
    if row not in ROWS or stage not in ("extend", "transfer", "mlm") or part not in ("", "window-alone"):
        raise SystemExit(f"error: unknown reader {name!r}: sdpa-512, sdpa-512@mlm_512 or <row>@<stage>[-window-alone]")
    return str(folder_of(row, stage)), LONG, "window" if part else None, ROWS[row].block if ROWS[row].framed else None


def far_tokens(inputs, labels) -> list[bool]:
    """For each masked token of one document's content (``inputs``, ``labels`` ``[L]``, in order): whether its word
    occurs unmasked earlier in the document, but not earlier in its own chunk of ``CHUNK`` tokens."""
    far = []
    for position in (labels != -100).nonzero().flatten().tolist():
        word, start = int(labels[position]), position - position % CHUNK
        before = (inputs[:position] == word).nonzero().flatten()
        far.append(bool(len(before)) and int(before.max()) < start)
    return far


def token_losses(model, tokenizer, length: int, block: int | None = None) -> list[float]:
    """The cross-entropy of every held-out masked token, in document order, read in windows of ``length`` (framed at
    every block of ``block``, where given: the same tokens in the same order)."""
    import torch

    from heldout import masked_features

    losses = []
    with torch.no_grad():
        for input_ids, labels in heldout_windows(tokenizer, length, block):
            features, targets = masked_features(model, input_ids, labels)
            losses += torch.nn.functional.cross_entropy(model.lm_head(features).float(), targets,
                                                        reduction="none").tolist()
    return losses


def document_far_tokens(tokenizer) -> list[bool]:
    """:func:`far_tokens` of every held-out document, in the order of :func:`token_losses`."""
    far = []
    for input_ids, labels in heldout_windows(tokenizer, LONG):
        far += far_tokens(input_ids[0, 1:-1], labels[0, 1:-1])
    return far


def folder_losses(folder, length: int, part: str | None = None, block: int | None = None) -> tuple[list, list]:
    """:func:`token_losses` of the masked-LM model in ``folder`` (its hybrid ``part`` alone, where given) and
    :func:`document_far_tokens`."""
    from transformers import AutoTokenizer

    from hf_effattn import EffAttnRobertaForMaskedLM
    from hf_effattn.models.hybrid_parts import only_part

    model = EffAttnRobertaForMaskedLM.from_pretrained(folder).to(default_device()).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    with only_part(model, part):
        return token_losses(model, tokenizer, length, block), document_far_tokens(tokenizer)


def measure(name: str) -> dict:
    folder, length, part, block = reader(name)
    losses, far = folder_losses(folder, length, part, block)
    assert len(far) == len(losses) and CONTENT % CHUNK == 0
    return {"reader": name, "folder": folder, "length": length, "part": part, "framed_block": block,
            "losses": losses, "far": far,
            "far_tokens": sum(far), "masked_tokens": len(far),
            "loss_far": sum(loss for loss, is_far in zip(losses, far) if is_far) / max(sum(far), 1),
            "loss_near": sum(loss for loss, is_far in zip(losses, far) if not is_far) / max(len(far) - sum(far), 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--readers", nargs="+", required=True)
    parser.add_argument("--again", action="store_true", help="measure a reader even where its result exists")
    args = parser.parse_args()
    set_threads(1)
    for name in args.readers:
        reader(name)  # every name checked before the first runs
    measure_each(KIND, args.readers, measure, args.again)


if __name__ == "__main__":
    main()
