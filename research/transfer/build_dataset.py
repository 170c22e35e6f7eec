"""Build the 8-class "Debian package description -> Section" text classification data set.

Source
    The English long descriptions of the binary packages in Debian 12 "bookworm" ``main``
    (amd64), labelled by each package's own ``Section`` field. Both come from the APT
    index files that ``apt-get update`` stores under /var/lib/apt/lists/: the ``Packages``
    index (Package, Section, Description-md5) and the ``Translation-en`` index (the
    English descriptions, joined on Description-md5). Only the ``bookworm`` suite itself
    is read (not bookworm-updates / bookworm-security), so the data change only with a
    Debian point release. Built from bookworm 12.15 (InRelease dated 2026-07-11).

Install (this script installs nothing; it stops with a one-line error if the index is missing)
    apt-get update -o Acquire::Languages=en
    (the language option is needed where apt is configured with Acquire::Languages "none",
    as in Debian's Docker images; scikit-learn >= 1.0 is used for the near-duplicate filter.)

Rebuild
    python3 research/transfer/build_dataset.py

Text and cleaning
    The text of a package is the first paragraph of its long description (the upstream
    blurb; the later paragraphs are mostly Debian boilerplate such as "This package
    contains the development files"), whitespace-normalised. Dropped: transitional, dummy
    and meta packages, paragraphs of fewer than 8 words, paragraphs that end with ":" (a
    list intro). Texts shared by several packages (e.g. libfoo, libfoo-dev, foo-doc) are
    kept once; a text found in two of the eight sections is dropped as ambiguous;
    near-duplicates (TF-IDF cosine >= 0.8, e.g. plugin families) are kept once, the first
    in package-name order. Deduplication runs over the whole pool before splitting, so no
    text or near-duplicate is shared between train, validation and unlabeled.

Labels (Debian Sections)
    admin, devel, games, net, science, sound, text, x11

Splits (per class: sorted, shuffled with random.Random(SEED), validation taken first)
    validation.csv  800 rows (100 per class), columns text,label
    train.csv       2400 rows (300 per class), columns text,label
    unlabeled.txt   the remaining texts of the eight sections (at most 5,000), one per line
    provenance.csv  split,row,package,section for every row of the three files above
"""

from __future__ import annotations

import collections
import csv
import glob
import random
import re
import subprocess
import sys
from pathlib import Path

LISTS = "/var/lib/apt/lists"
SUITE = "bookworm"
LABELS = ("admin", "devel", "games", "net", "science", "sound", "text", "x11")
N_VAL, N_TRAIN, MAX_UNLABELED = 100, 300, 5000
MIN_WORDS, NEAR_DUP_COSINE, SEED = 8, 0.8, 20240607
INSTALL = "apt-get update -o Acquire::Languages=en"
OUT = Path(__file__).resolve().parent / "data"
DROP = re.compile(r"\b(transitional (dummy )?package|dummy package|meta-?package|empty package)\b", re.I)


def index_file(kind: str) -> str:
    """The one APT index file of the bookworm main suite for `kind`, or exit with the install hint."""
    hits = sorted(glob.glob(f"{LISTS}/*_debian_dists_{SUITE}_main_{kind}*"))
    if len(hits) != 1:
        sys.exit(f"error: Debian {SUITE} main {kind} index not found in {LISTS}; run: {INSTALL}")
    return hits[0]


def stanzas(path: str):
    """Yield the stanzas of a (possibly compressed) APT index file as dicts."""
    text = subprocess.run(["/usr/lib/apt/apt-helper", "cat-file", path],
                          capture_output=True, text=True, check=True).stdout
    for block in text.split("\n\n"):
        fields, key = {}, None
        for line in block.split("\n"):
            if line.startswith(" ") and key:
                fields[key] += "\n" + line
            elif ":" in line:
                key, value = line.split(":", 1)
                fields[key] = value.strip()
        if fields:
            yield fields


def first_paragraph(description: str) -> str:
    """First paragraph of a long description (the lines after the synopsis, up to ' .')."""
    lines = []
    for line in description.split("\n")[1:]:
        if line.strip() == ".":
            break
        lines.append(line.strip())
    return " ".join(" ".join(lines).split())


def collect() -> list[tuple[str, str, str]]:
    """(text, label, package) for every kept, deduplicated description, in package order."""
    english = {s["Description-md5"]: s["Description-en"]
               for s in stanzas(index_file("i18n_Translation-en"))}
    sections, first = collections.defaultdict(set), {}
    for s in sorted(stanzas(index_file("binary-amd64_Packages")), key=lambda s: s["Package"]):
        label = s.get("Section", "").split("/")[-1]
        if label not in LABELS or s.get("Description-md5") not in english:
            continue
        text = first_paragraph(english[s["Description-md5"]])
        if DROP.search(text) or text.endswith(":") or len(text.split()) < MIN_WORDS:
            continue
        key = re.sub(r"[^a-z0-9]+", " ", text.lower()).strip()
        sections[key].add(label)
        first.setdefault(key, (text, label, s["Package"]))
    rows = sorted((first[k] for k, labels in sections.items() if len(labels) == 1),
                  key=lambda r: r[2])
    return drop_near_duplicates(rows)


def drop_near_duplicates(rows):
    from sklearn.feature_extraction.text import TfidfVectorizer

    vectors = TfidfVectorizer(sublinear_tf=True).fit_transform([r[0] for r in rows])
    similar = (vectors @ vectors.T).tocsr()
    dropped, kept = set(), []
    for i, row in enumerate(rows):
        if i in dropped:
            continue
        kept.append(row)
        lo, hi = similar.indptr[i], similar.indptr[i + 1]
        dropped.update(int(j) for j, v in zip(similar.indices[lo:hi], similar.data[lo:hi])
                       if j > i and v >= NEAR_DUP_COSINE)
    return kept


def main() -> None:
    inrelease = sorted(glob.glob(f"{LISTS}/*_debian_dists_{SUITE}_InRelease"))
    version = next((line.split(":", 1)[1].strip() for line in open(inrelease[0])
                    if line.startswith("Version:")), "?") if inrelease else "?"
    rows = collect()
    splits = {"validation": [], "train": [], "unlabeled": []}
    for label in LABELS:
        texts = sorted(r for r in rows if r[1] == label)
        if len(texts) < N_VAL + N_TRAIN:
            sys.exit(f"error: section {label} has only {len(texts)} texts")
        random.Random(f"{SEED}-{label}").shuffle(texts)
        splits["validation"] += texts[:N_VAL]
        splits["train"] += texts[N_VAL:N_VAL + N_TRAIN]
        splits["unlabeled"] += texts[N_VAL + N_TRAIN:]
    random.Random(SEED).shuffle(splits["train"])
    random.Random(SEED).shuffle(splits["unlabeled"])
    splits["unlabeled"] = splits["unlabeled"][:MAX_UNLABELED]

    OUT.mkdir(parents=True, exist_ok=True)
    for name in ("train", "validation"):
        with open(OUT / f"{name}.csv", "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f, lineterminator="\n")
            w.writerow(["text", "label"])
            w.writerows((t, l) for t, l, _ in splits[name])
    (OUT / "unlabeled.txt").write_text("".join(t + "\n" for t, _, _ in splits["unlabeled"]),
                                       encoding="utf-8")
    with open(OUT / "provenance.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["split", "row", "package", "section"])
        for name, part in splits.items():
            w.writerows((name, i, p, l) for i, (_, l, p) in enumerate(part))
    counts = {n: collections.Counter(l for _, l, _ in p) for n, p in splits.items()}
    print(f"Debian {SUITE} {version} main: {len(rows)} texts after deduplication")
    for name, c in counts.items():
        print(f"  {name}: {sum(c.values())} " + " ".join(f"{l}={c[l]}" for l in LABELS))


if __name__ == "__main__":
    main()
