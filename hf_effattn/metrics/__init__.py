"""GLUE's metrics as an ``evaluate`` module shipped inside the package, loaded from its local path (offline)::

    import evaluate
    from hf_effattn.metrics import metric_path

    metric = evaluate.load(metric_path(), "mrpc")   # a GLUE task, or "classification" / "regression"
    metric.compute(predictions=[1, 0, 1], references=[1, 0, 0])   # {'accuracy': 0.667, 'f1': 0.667}

``glue/glue.py`` is the module; each configuration is a GLUE task (``cola``, ``sst2``, ``mrpc``, ``qqp``,
``stsb``, ``mnli``, ``mnli_matched``, ``mnli_mismatched``, ``qnli``, ``rte``, ``wnli``, ``ax``) or, for other
datasets, ``classification`` (accuracy) or ``regression`` (Pearson and Spearman correlations). The fine-tuning
scripts compute their metrics with it.
"""

from __future__ import annotations

from pathlib import Path

METRICS_DIR = Path(__file__).resolve().parent


def list_metrics() -> list[str]:
    """The names of the shipped metric modules."""
    return sorted(path.parent.name for path in METRICS_DIR.glob("*/*.py") if path.stem == path.parent.name)


def metric_path(name: str = "glue") -> str:
    """The folder of the shipped metric module ``name``, for ``evaluate.load(metric_path(name), config_name)``."""
    if name not in list_metrics():
        raise ValueError(f"No metric module {name!r} in hf_effattn; the shipped ones: {', '.join(list_metrics())}.")
    return str(METRICS_DIR / name)
