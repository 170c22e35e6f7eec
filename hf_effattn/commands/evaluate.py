"""``hf-effattn evaluate``: the command line of :func:`~hf_effattn.evaluation.evaluate`.

    hf-effattn evaluate roberta-blocks-4096 --documents documents.jsonl --output results.json
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..options.argument_types import bounded_int, non_negative_int, positive_int
from ..options.parser_values import PASSAGE_LENGTH


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", help="a masked-LM checkpoint: a folder of this package (converted or trained) or a "
                                      "BERT or RoBERTa masked-LM folder or Hub id")
    parser.add_argument("--documents", required=True, type=Path, metavar="FILE",
                        help='the documents: a .jsonl file of {"text": ...} objects, or a text file of one document '
                             "a line")
    parser.add_argument("--max_length", type=bounded_int(3), default=None, metavar="N",
                        help="the tokens the model reads of each document (default: its longest input)")
    parser.add_argument("--chunk_length", type=bounded_int(3), default=None, metavar="N",
                        help="the chunked reader's chunks (default: the checkpoint's own length: the model's blocks, "
                             "or the length its positions were extended from)")
    parser.add_argument("--passage_length", type=positive_int, default=PASSAGE_LENGTH, metavar="N",
                        help=f"the tokens of each retrieval passage (default {PASSAGE_LENGTH})")
    parser.add_argument("--seed", type=non_negative_int, default=0, help="the masking and the passages (default 0)")
    parser.add_argument("--device", default=None, help="default: cuda where there is one, else cpu")
    parser.add_argument("--output", type=Path, default=None, metavar="FILE",
                        help="also write the results to this JSON file (a new file: an existing one is kept)")


def run(args: argparse.Namespace) -> int:
    """Evaluate, print the table, and write the JSON file where asked."""
    from ..evaluation import evaluate

    if args.output is not None and args.output.exists():
        raise FileExistsError(f"--output {args.output} exists: give a new file's path (the existing one is kept).")
    report = evaluate(args.model, args.documents, max_length=args.max_length, chunk_length=args.chunk_length,
                      passage_length=args.passage_length, seed=args.seed, device=args.device)
    print(report.table())
    if args.output is not None:
        report.write_json(args.output)
        print(f"Wrote {args.output}")
    return 0
