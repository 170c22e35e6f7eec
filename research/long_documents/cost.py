#!/usr/bin/env python
"""The cost of one training step of each benchmark row at 2,048 and 8,192 tokens, against softmax at the same length.

Each row of ``rows.ROWS`` (its attention and window, not its trained weights: the cost does not depend on them) is
MiniLM-L6-H384 converted as ``pretrain.py`` converts it, extended to the length, with a new 5-label classification
head; one step is forward, backward and an AdamW step on one real document's first tokens (batch 1; ``--batch_size``
repeats it). The rows take turns (``--repeats`` rounds after a warm-up, one thread: the median of each is kept, so
that a noisy machine slows every row alike), and each step's peak memory is PyTorch's allocator's
(``hf_effattn.benchmark.measuring``). It runs on CUDA where there is one; ``--dtype bfloat16`` runs the step under
bfloat16 autocast (mixed precision, as users train on a GPU).

MiniLM trains with dropout on its attention probabilities (0.1), which takes PyTorch's CPU ``sdpa`` off its fused
kernel onto one that writes the N x N probabilities out; ``--no_attention_dropout`` measures every row with it off
(the fused kernel's linear memory for ``sdpa``: the only way ``sdpa`` fits at 8,192 tokens on a 24 GiB machine).

``--masked_lm`` times the masked-LM step of ``run_mlm.py`` instead, with the logits at every token (``dense``)
and only at the masked ones (``sparse``, ModernBERT's sparse prediction, what ``run_mlm.py`` does).

Results: ``results/cost/<length>.json`` (``<length>_no_attention_dropout.json``) and
``results/cost/masked_lm_<length>.json``; on CUDA, in bfloat16 or with a larger batch the name says so
(``2048_cuda_bfloat16_batch8.json``). ``--blocks`` times the rows with aligned blocks instead (the chunked reader
``local-b512`` and each mechanism as a memory across its blocks), named ``..._blocks.json``. Every step runs on the
exact path (``fast_paths("exact")``); ``--fast_paths`` also times each row on its fast path (``"auto"``: on a CPU,
PSF's factors compiled), ``<row> auto``, in the same rounds (its warm-up step compiles), named
``..._fast_paths.json``.

    python research/long_documents/cost.py --length 2048 --repeats 3
    python research/long_documents/cost.py --length 8192 --repeats 2 --no_attention_dropout
    python research/long_documents/cost.py --length 2048 --masked_lm --rows sdpa kerformer-w128
    python research/long_documents/cost.py --length 8192 --repeats 2 --no_attention_dropout --blocks
    python research/long_documents/cost.py --length 8192 --repeats 5 --no_attention_dropout --fast_paths \
        --rows local-b512 psf-b512
    python research/long_documents/cost.py --length 8192 --dtype bfloat16 --batch_size 2   # on a GPU
"""

from __future__ import annotations

import argparse
import statistics

from rows import LONG, ROWS
from runs import default_device, kept, read_jsonl, set_threads, write_result

from hf_effattn.options.argument_types import positive_int
from hf_effattn.benchmark.machine import machine_description

KIND = "cost"
COST_ROWS = ["sdpa", "local-w128", "local-w128-g1", "singularformer", "kerformer", "dba", "psf", "singularformer-w128",
             "kerformer-w128", "dba-w128", "psf-w128"]
BLOCK_COST_ROWS = ["local-b512", "singularformer-b512", "kerformer-b512", "kerformer-b512-gated", "dba-b512",
                   "psf-b512"]


def build(row_name: str, length: int, model_class, attention_dropout: float | None = None):
    """The row's model (MiniLM converted, extended to ``length``) as ``model_class``, in training mode; with
    ``attention_dropout``, that instead of MiniLM's dropout on the attention probabilities."""
    from pretrain import HEAD_FOLDER

    row = ROWS[row_name]
    extra = {"num_labels": 5} if "Classification" in model_class.__name__ else {}
    if attention_dropout is not None:
        extra["attention_probs_dropout_prob"] = attention_dropout
    return model_class.from_pretrained(HEAD_FOLDER, attention_type=row.attention, attention_config=row.settings,
                                       convert_attention=True, max_length=length, **extra).to(default_device()).train()


def document_ids(length: int, batch_size: int):
    """The first ``length`` tokens (with [CLS] and [SEP]) of the first training document long enough, repeated
    ``batch_size`` times: ``[batch_size, N]``."""
    from transformers import AutoTokenizer

    from pretrain import HEAD_FOLDER

    tokenizer = AutoTokenizer.from_pretrained(HEAD_FOLDER)
    for row in read_jsonl("mlm_train"):
        ids = tokenizer(row["text"], truncation=True, max_length=length, return_tensors="pt")["input_ids"]
        if ids.shape[1] == length:
            return ids.repeat(batch_size, 1).to(default_device())
    raise SystemExit(f"error: no training document has {length} tokens")


def classification_step(model, ids, dtype: str):
    import torch

    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    labels = torch.zeros(ids.shape[0], dtype=torch.long, device=ids.device)

    def step():
        with autocast(ids.device, dtype):
            loss = model(input_ids=ids, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()

    return step


def masked_lm_step(model, ids, sparse: bool, dtype: str):
    import torch

    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    generator = torch.Generator().manual_seed(0)
    labels = torch.where(torch.rand(ids.shape, generator=generator).to(ids.device) < 0.15, ids, -100)

    def step():
        with autocast(ids.device, dtype):
            loss = model(input_ids=ids, labels=labels, sparse_prediction=sparse).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()

    return step


def autocast(device, dtype: str):
    """bfloat16 autocast on ``device`` for ``dtype == "bfloat16"``, else nothing (float32)."""
    import contextlib

    import torch

    if dtype == "float32":
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=getattr(torch, dtype))


def in_mode(step, mode: str):
    """``step`` run with the fast paths in ``mode`` (``fast_paths.py``)."""
    from hf_effattn.modeling.fast_paths import fast_paths

    def run():
        with fast_paths(mode):
            step()

    return run


def subjects(args, attention_dropout: float | None) -> dict:
    """The training steps to time, by name (``args``: the command line's), each on the exact path, and with
    ``--fast_paths`` each also on its fast path (``"<name> auto"``)."""
    steps = exact_subjects(args, attention_dropout)
    modes = ["exact", "auto"] if args.fast_paths else ["exact"]
    return {name + ("" if mode == "exact" else f" {mode}"): in_mode(step, mode)
            for name, step in steps.items() for mode in modes}


def exact_subjects(args, attention_dropout: float | None) -> dict:
    from hf_effattn import EffAttnRobertaForMaskedLM, EffAttnRobertaForSequenceClassification

    ids = document_ids(args.length, args.batch_size)
    if not args.masked_lm:
        return {row: classification_step(build(row, args.length, EffAttnRobertaForSequenceClassification,
                                               attention_dropout), ids, args.dtype) for row in args.rows}
    steps = {}
    for row in args.rows:
        model = build(row, args.length, EffAttnRobertaForMaskedLM, attention_dropout)
        steps.update({f"{row} dense": masked_lm_step(model, ids, False, args.dtype),
                      f"{row} sparse": masked_lm_step(model, ids, True, args.dtype)})
    return steps


def measure(args, attention_dropout: float | None) -> dict:
    """Median seconds and peak MiB of each subject's step, taking turns."""
    from hf_effattn.benchmark.measuring import peak_bytes, timed_seconds

    device = default_device()
    steps = subjects(args, attention_dropout)
    for step in steps.values():
        step()  # warm-up; the optimizer's state exists before the measured steps
    times = {name: [] for name in steps}
    for _ in range(args.repeats):
        for name, step in steps.items():
            times[name].append(timed_seconds(step, device))
    return {name: {"step_seconds": statistics.median(times[name]), "all_seconds": times[name],
                   "peak_mib": peak_bytes(step, device) / 2**20} for name, step in steps.items()}


def measurement_name(args) -> str:
    """The result's name: ``[masked_lm_]<length>[_no_attention_dropout][_cuda][_bfloat16][_batch<B>][_blocks]
    [_fast_paths]``."""
    name = f"masked_lm_{args.length}" if args.masked_lm else str(args.length)
    name += "_no_attention_dropout" if args.no_attention_dropout else ""
    name += "_cuda" if default_device().type == "cuda" else ""
    name += "" if args.dtype == "float32" else f"_{args.dtype}"
    name += f"_batch{args.batch_size}" if args.batch_size > 1 else ""
    name += "_blocks" if args.blocks else ""
    return name + ("_fast_paths" if args.fast_paths else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    rows = parser.add_mutually_exclusive_group()
    rows.add_argument("--rows", nargs="+", default=COST_ROWS, choices=list(ROWS))
    rows.add_argument("--blocks", action="store_true",
                      help=f"the rows with aligned blocks ({' '.join(BLOCK_COST_ROWS)}) instead, in a result of "
                           "their own")
    parser.add_argument("--length", type=positive_int, default=LONG)
    parser.add_argument("--masked_lm", action="store_true", help="the masked-LM step, dense and sparse")
    parser.add_argument("--repeats", type=positive_int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--no_attention_dropout", action="store_true",
                        help="every row without dropout on its attention probabilities (MiniLM's is 0.1)")
    parser.add_argument("--batch_size", type=positive_int, default=1, help="the document repeated this many times")
    parser.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32",
                        help="bfloat16: the step under bfloat16 autocast")
    parser.add_argument("--fast_paths", action="store_true",
                        help="each row also on its fast path (fast_paths('auto')), in the same rounds")
    parser.add_argument("--again", action="store_true", help="measure anew where this measurement's result exists")
    args = parser.parse_args()
    args.rows = BLOCK_COST_ROWS if args.blocks else args.rows
    name = measurement_name(args)
    if kept(KIND, name, args.again):
        return
    set_threads(args.threads)
    dropout = 0.0 if args.no_attention_dropout else None
    results = measure(args, dropout)
    write_result(KIND, name, {"length": args.length, "threads": args.threads, "repeats": args.repeats,
                              "attention_dropout": "MiniLM's (0.1)" if dropout is None else dropout,
                              "device": machine_description(default_device()), "dtype": args.dtype,
                              "batch_size": args.batch_size,
                              "fast_paths": "each row exact and auto" if args.fast_paths else "exact",
                              "steps": results, "what": "one training step: forward, backward, AdamW step"})
    for subject, result in results.items():
        print(f"{subject:28s} {result['step_seconds']:8.2f} s  {result['peak_mib']:8.0f} MiB")


if __name__ == "__main__":
    main()
