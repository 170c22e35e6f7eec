#!/usr/bin/env python
"""Classification of long documents (Linux documentation -> subsystem): SDPA at 512 and 2,048 against the mechanisms.

Configurations (``--configs``):

``sdpa_512``          MiniLM as shipped, documents truncated to their first 512 tokens;
``sdpa_2048``         MiniLM with positions copied to 2,048 (``models/sdpa-2048-extended`` of run_masked_lm.py);
``<mechanism>_2048``  the mechanism after extension + long attention transfer (``models/<mechanism>-2048-transfer``);
                      ``--after extended`` / ``--after mlm`` take the model of that stage of run_masked_lm.py instead.

Three measurements, each writing JSON under ``results/classification/``:

``--probe``     linear probe (what fits a CPU): the frozen encoder's last hidden state averaged over the tokens, one
                document at a time, for the first ``--probe_train_per_label`` training documents of each label and
                the 50 test documents; then, per seed, a logistic regression (standardised features, L2) on that
                seed's own sample of ``--probe_sample`` documents per label; test accuracy per seed
                (``probe_<name>.json``).
(default)       fine-tuning with ``finetune/run_text_classification.py``'s own code (``--train_file
                data/train.jsonl --validation_file data/test.jsonl``), ``--steps`` optimizer steps, so each seed
                sees its own sample and order of the training documents; settings fixed in advance, not tuned on
                the test split (``<name>_seed<seed>.json``).
``--measure``   one training step (forward, backward, AdamW step; batch 1, a real document at the configuration's
                length): median time of ``--repeats`` after one warm-up, configurations taking turns, and its peak
                memory (PyTorch's allocator, as ``hf-effattn bench`` measures it) (``step_<config>.json``).

``--table`` prints the Markdown table (mean and standard error over the seeds) and writes ``results/classification.md``
and ``.png``.

    python benchmarks/long_documents/run_classification.py --probe --configs sdpa_512 sdpa_2048 kerformer_2048
    python benchmarks/long_documents/run_classification.py --measure --repeats 2
    python benchmarks/long_documents/run_classification.py --configs sdpa_512 --seeds 1 2 3 --steps 24
    python benchmarks/long_documents/run_classification.py --table
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import time
from pathlib import Path

from common import DATA, LONG, MECHANISMS, MODELS, default_device, figure_and_axes, markdown_table, mean_and_error, \
    minilm_folder, publish, read_jsonl, read_result, save_figure, set_threads, write_result

KIND = "classification"
CONFIGS = ("sdpa_512", "sdpa_2048", *(f"{mechanism}_{LONG}" for mechanism in MECHANISMS))
AFTER = {"extended": "extension only", "transfer": "extension + transfer", "mlm": "extension + transfer + MLM"}


def length_of(config: str) -> int:
    return int(config.rsplit("_", 1)[1])


def model_source(config: str, after: str) -> tuple[str, dict]:
    """Where a configuration's encoder comes from: the checkpoint and the arguments it loads with."""
    if config == "sdpa_512":
        return str(minilm_folder()), {"attention_type": "sdpa"}
    attention = config.rsplit("_", 1)[0]
    folder = MODELS / f"{attention}-{LONG}-{'extended' if attention == 'sdpa' else after}"
    if not folder.is_dir():
        raise SystemExit(f"error: {folder} is missing; run run_masked_lm.py --stages head extend transfer first")
    return str(folder), {}


def model_arguments(config: str, after: str) -> list[str]:
    """:func:`model_source` as ``run_text_classification.py`` options."""
    checkpoint, loading = model_source(config, after)
    return ["--model_name_or_path", checkpoint, *(item for name, value in loading.items()
                                                  for item in (f"--{name}", value))]


def finetune(config: str, seed: int, args) -> dict:
    """One fine-tuning run; its test metrics and wall time (training and the one evaluation)."""
    from hf_effattn.finetuning.text_classification import main

    output = MODELS / "classification" / f"{config}_seed{seed}"
    started = time.perf_counter()
    outcome = main([
        *model_arguments(config, args.after), "--train_file", str(DATA / "train.jsonl"),
        "--validation_file", str(DATA / "test.jsonl"), "--max_length", str(length_of(config)),
        "--per_device_train_batch_size", str(args.batch_size), "--per_device_eval_batch_size", str(args.batch_size),
        "--gradient_accumulation_steps", str(args.accumulation), "--learning_rate", str(args.learning_rate),
        "--num_warmup_steps", str(args.steps // 10), "--max_train_steps", str(args.steps), "--seed", str(seed),
        "--output_dir", str(output), "--overwrite_output_dir",
    ])
    seconds = round(time.perf_counter() - started, 1)
    shutil.rmtree(output)  # ~90 MB a run; the metrics are what the table needs
    return {"config": config, "seed": seed, "after": after_of(config, args.after),
            "steps": args.steps, "batch_size": args.batch_size, "accumulation": args.accumulation,
            "learning_rate": args.learning_rate,
            "max_length": length_of(config), "test": outcome.final_metrics["validation"], "run_seconds": seconds,
            "history": outcome.state.history}


def load_model(model_class, config: str, after: str, **kwargs):
    """The configuration's encoder as ``model_class`` (e.g. with a new 5-label head)."""
    checkpoint, loading = model_source(config, after)
    return model_class.from_pretrained(checkpoint, **loading, **kwargs)


def load_classifier(config: str, after: str):
    """The configuration's classifier as the fine-tuning script builds it (new 5-label head)."""
    from hf_effattn import EffAttnRobertaForSequenceClassification

    return load_model(EffAttnRobertaForSequenceClassification, config, after, num_labels=5)


def probe_rows(args) -> dict[str, list[dict]]:
    """The probe's documents: the first ``--probe_train_per_label`` training documents of each label, and the test
    split."""
    train, taken = [], {}
    for row in read_jsonl("train"):
        taken[row["label"]] = taken.get(row["label"], 0) + 1
        if taken[row["label"]] <= args.probe_train_per_label:
            train.append(row)
    return {"train": train, "test": read_jsonl("test")}


def mean_pooled_features(config: str, rows: list[dict], after: str):
    """The frozen encoder's last hidden state averaged over the tokens, one document at a time: ``[D, C]``."""
    import torch
    from transformers import AutoTokenizer

    from hf_effattn import EffAttnRobertaModel

    tokenizer = AutoTokenizer.from_pretrained(minilm_folder())
    model = load_model(EffAttnRobertaModel, config, after).to(default_device()).eval()
    features = []
    with torch.no_grad():
        for row in rows:
            ids = tokenizer(row["text"], truncation=True, max_length=length_of(config), return_tensors="pt")
            features.append(model(ids["input_ids"].to(model.device)).last_hidden_state[0].mean(0).float().cpu())
    return torch.stack(features)


def probe(config: str, args) -> dict:
    """Linear probe: logistic regression on the frozen encoder's mean-pooled features; one fit per seed, each on its
    own sample of ``--probe_sample`` training documents per label; test accuracy per seed."""
    import random

    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    rows = probe_rows(args)
    started = time.perf_counter()
    features = {split: mean_pooled_features(config, part, args.after).numpy() for split, part in rows.items()}
    encode_seconds = round(time.perf_counter() - started, 1)
    labels = {split: [row["label"] for row in part] for split, part in rows.items()}
    accuracies = {}
    for seed in args.seeds:
        chosen = []
        for label in sorted(set(labels["train"])):
            indices = [i for i, name in enumerate(labels["train"]) if name == label]
            chosen += random.Random(f"{seed}-{label}").sample(indices, args.probe_sample)
        classifier = make_pipeline(StandardScaler(), LogisticRegression(C=args.probe_c, max_iter=2000))
        classifier.fit(features["train"][chosen], [labels["train"][i] for i in chosen])
        accuracies[seed] = float(classifier.score(features["test"], labels["test"]))
    return {"config": config, "after": after_of(config, args.after), "max_length": length_of(config),
            "train_per_label": args.probe_train_per_label, "sample_per_label": args.probe_sample, "c": args.probe_c,
            "test_documents": len(rows["test"]), "accuracy_by_seed": accuracies, "encode_seconds": encode_seconds}


def after_of(config: str, after: str) -> str | None:
    return None if config.startswith("sdpa_") else after


def training_step(model, optimizer, input_ids):
    import torch

    def step():
        model(input_ids=input_ids, labels=torch.tensor([0], device=input_ids.device)).loss.backward()
        optimizer.step()
        optimizer.zero_grad()

    return step


def measure(configs: list[str], args) -> None:
    """Median step time and peak memory of each configuration (see the module docstring)."""
    import torch
    from transformers import AutoTokenizer

    from hf_effattn.benchmark.measuring import peak_bytes, timed_seconds

    tokenizer = AutoTokenizer.from_pretrained(minilm_folder())
    text = read_jsonl("train")[0]["text"]
    steps, device = {}, default_device()
    for config in configs:
        model = load_classifier(config, args.after).to(device).train()
        ids = tokenizer(text, truncation=True, max_length=length_of(config), return_tensors="pt")["input_ids"]
        ids = ids.to(device)
        steps[config] = training_step(model, torch.optim.AdamW(model.parameters(), lr=1e-5), ids)
        steps[config]()  # warm-up, and the optimizer's state exists before the measured steps
    times = {config: [] for config in configs}
    for _ in range(args.repeats):
        for config in configs:
            times[config].append(timed_seconds(steps[config], device))
    for config in configs:
        write_result(KIND, f"step_{config}", {
            "config": config, "step_seconds": statistics.median(times[config]), "all_seconds": times[config],
            "peak_mib": peak_bytes(steps[config], device) / 2**20, "threads": args.threads, "device": str(device),
            "what": "one training step: forward, backward, AdamW step; batch 1"})


def run_name(config: str, after: str | None) -> str:
    """The results' name of a configuration: the mechanisms' name says which stage they start from."""
    return config if after is None else f"{config}-{after}"


def rows_to_show() -> list[tuple[str, str | None]]:
    """(config, after) of every table row: SDPA's two, and each mechanism's stages that have results (or its
    default stage, ``transfer``, as "not run")."""
    rows = [("sdpa_512", None), ("sdpa_2048", None)]
    for config in CONFIGS[2:]:
        found = [after for after in AFTER if read_result(KIND, f"probe_{run_name(config, after)}")
                 or runs_of(run_name(config, after))]
        rows += [(config, after) for after in found or ["transfer"]]
    return rows


def runs_of(name: str) -> list[dict]:
    results = [read_result(KIND, f"{name}_seed{seed}") for seed in range(1, 10)]
    return [result for result in results if result]


def percent_cell(values: list[float]) -> str:
    if not values:
        return "not run"
    if len(values) == 1:
        return f"{100 * values[0]:.1f} (1 seed)"
    mean, error = mean_and_error([100 * value for value in values])
    return f"{mean:.1f} ± {error:.1f} ({len(values)})"


def probe_accuracies(name: str) -> list[float]:
    result = read_result(KIND, f"probe_{name}")
    return list(result["accuracy_by_seed"].values()) if result else []


def relative_cell(config: str, key: str, digits: int) -> str:
    mine, baseline = read_result(KIND, f"step_{config}"), read_result(KIND, "step_sdpa_2048")
    if not mine:
        return "not run"
    text = f"{mine[key]:.{digits}f}"
    return f"{text} ({mine[key] / baseline[key]:.2f}x)" if baseline else text


def table() -> str:
    header = ["model", "tokens", "linear probe: test accuracy, % (mean ± s.e., seeds)",
              "fine-tuned: test accuracy, % (mean ± s.e., seeds)", "s / training step (x sdpa@2048)",
              "peak MiB / training step (x sdpa@2048)"]
    body = []
    for config, after in rows_to_show():
        name = run_name(config, after)
        label = config.rsplit("_", 1)[0] + (f" ({AFTER[after]})" if after else "")
        body.append([f"`{label}`", f"{length_of(config):,}", percent_cell(probe_accuracies(name)),
                     percent_cell([run["test"]["accuracy"] for run in runs_of(name)]),
                     relative_cell(config, "step_seconds", 2), relative_cell(config, "peak_mib", 0)])
    return markdown_table(header, body)


def plot(path: Path) -> None:
    figure, axes = figure_and_axes()
    colours = {config: f"C{index}" for index, config in enumerate(CONFIGS)}
    markers = {None: "o", "extended": "s", "transfer": "^", "mlm": "D"}
    for config, after in rows_to_show():
        accuracies, step = probe_accuracies(run_name(config, after)), read_result(KIND, f"step_{config}")
        if accuracies and step:
            mean, error = mean_and_error([100 * value for value in accuracies])
            axes.errorbar(step["step_seconds"], mean, yerr=error, marker=markers[after], color=colours[config],
                          capsize=3, linestyle="none", label=run_name(config, after))
    axes.set_xscale("log")
    axes.set_xlabel("seconds per training step (batch 1)")
    axes.set_ylabel("linear probe: test accuracy, %")
    save_figure(figure, axes, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", nargs="+", default=list(CONFIGS), choices=CONFIGS)
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3])
    parser.add_argument("--after", choices=tuple(AFTER), default="transfer",
                        help="which stage of run_masked_lm.py the mechanisms start from")
    parser.add_argument("--steps", type=int, default=24, help="optimizer steps")
    parser.add_argument("--batch_size", type=int, default=1, help="documents per step and device")
    parser.add_argument("--accumulation", type=int, default=1)
    parser.add_argument("--learning_rate", type=float, default=3e-4)
    parser.add_argument("--probe", action="store_true", help="linear probe of the frozen encoder instead")
    parser.add_argument("--probe_train_per_label", type=int, default=20, help="training documents encoded per label")
    parser.add_argument("--probe_sample", type=int, default=16, help="of which each seed's fit takes this many")
    parser.add_argument("--probe_c", type=float, default=1.0, help="inverse L2 strength of the logistic regression")
    parser.add_argument("--measure", action="store_true", help="time a training step instead of fine-tuning")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--table", action="store_true", help="only print the table of the saved results")
    args = parser.parse_args()
    if not args.table:
        set_threads(args.threads)
        if args.measure:
            measure(args.configs, args)
        elif args.probe:
            for config in args.configs:
                write_result(KIND, f"probe_{run_name(config, after_of(config, args.after))}", probe(config, args))
        else:
            for seed in args.seeds:
                for config in args.configs:
                    name = run_name(config, after_of(config, args.after))
                    write_result(KIND, f"{name}_seed{seed}", finetune(config, seed, args))
    publish(KIND, table(), plot)


if __name__ == "__main__":
    main()
