"""Evaluation metrics, computed offline with scikit-learn and SciPy.

GLUE's metrics are those its benchmark defines per task: Matthews correlation for CoLA, Pearson and
Spearman correlations for STS-B, accuracy and F1 (of the positive class) for MRPC and QQP, accuracy
for the others. Where a task has two metrics, ``combined_score`` is their mean, as GLUE's leaderboard
averages them; it is the task's main metric, by which the best checkpoint is chosen.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import pearsonr, spearmanr
from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef

GLUE_METRICS = {
    "cola": ("matthews_correlation",),
    "stsb": ("pearson", "spearmanr"),
    "mrpc": ("accuracy", "f1"),
    "qqp": ("accuracy", "f1"),
}


def _matthews_correlation(predictions: np.ndarray, references: np.ndarray) -> float:
    return matthews_corrcoef(references, predictions)


def _accuracy(predictions: np.ndarray, references: np.ndarray) -> float:
    return accuracy_score(references, predictions)


def _f1(predictions: np.ndarray, references: np.ndarray) -> float:
    return f1_score(references, predictions)


def _pearson(predictions: np.ndarray, references: np.ndarray) -> float:
    return pearsonr(predictions, references)[0]


def _spearman(predictions: np.ndarray, references: np.ndarray) -> float:
    return spearmanr(predictions, references)[0]


METRIC_FUNCTIONS = {
    "accuracy": _accuracy,
    "f1": _f1,
    "matthews_correlation": _matthews_correlation,
    "pearson": _pearson,
    "spearmanr": _spearman,
}


@dataclass(frozen=True)
class MetricSpec:
    """Which metrics a task reports; ``is_regression`` says predictions are scores, not class ids."""

    names: tuple[str, ...]
    is_regression: bool = False

    @property
    def main(self) -> str:
        """The metric that ranks checkpoints: the only one, or ``combined_score`` (the mean of all)."""
        return self.names[0] if len(self.names) == 1 else "combined_score"

    def compute(self, predictions, references) -> dict[str, float]:
        """Every metric of the task on the given predictions (class ids or scores) and references."""
        predictions, references = np.asarray(predictions), np.asarray(references)
        results = {name: float(METRIC_FUNCTIONS[name](predictions, references)) for name in self.names}
        if len(results) > 1:
            results["combined_score"] = float(np.mean(list(results.values())))
        return results


def metric_spec(task_name: str | None, is_regression: bool) -> MetricSpec:
    """GLUE's metrics for a GLUE task; otherwise accuracy, or Pearson/Spearman for a regression."""
    if task_name in GLUE_METRICS:
        return MetricSpec(GLUE_METRICS[task_name], is_regression=task_name == "stsb")
    if is_regression:
        return MetricSpec(GLUE_METRICS["stsb"], is_regression=True)
    return MetricSpec(("accuracy",))
