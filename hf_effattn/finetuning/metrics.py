"""Evaluation metrics: GLUE's, computed by the ``evaluate`` module shipped in :mod:`hf_effattn.metrics`, loaded
from its local path (offline).

GLUE's metrics are those its benchmark defines per task: Matthews correlation for CoLA, Pearson and
Spearman correlations for STS-B, accuracy and F1 (of the positive class) for MRPC and QQP, accuracy
for the others; other datasets get accuracy, or the correlations for a regression. Where a task has two
metrics, ``combined_score`` is their mean, as GLUE's leaderboard averages them; it is the task's main
metric, by which the best checkpoint is chosen.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from ..metrics import metric_path
from ..metrics.glue.glue import SCORES, TASK_METRICS


@functools.lru_cache(maxsize=None)
def load_metric(config_name: str):
    """The shipped ``glue`` evaluate module in configuration ``config_name`` (a GLUE task, ``classification`` or
    ``regression``), kept in memory (no cache files, so concurrent processes never share one)."""
    import evaluate

    return evaluate.load(metric_path("glue"), config_name, keep_in_memory=True)


@dataclass(frozen=True)
class MetricSpec:
    """Which metrics a task reports, and the configuration of the ``glue`` module that computes them;
    ``is_regression`` says predictions are scores, not class ids; ``greater_is_better`` says which way the main
    metric improves (``False`` for a loss or a perplexity)."""

    names: tuple[str, ...]
    is_regression: bool = False
    config_name: str = "classification"
    greater_is_better: bool = True

    def improves(self, value: float, best: float | None) -> bool:
        """Whether ``value`` of the main metric beats ``best`` (``None`` or NaN, e.g. a correlation of constant
        predictions: anything does)."""
        if best is None or math.isnan(best):
            return True
        return value > best if self.greater_is_better else value < best

    @property
    def main(self) -> str:
        """The metric that ranks checkpoints: the only one, or ``combined_score`` (the mean of all)."""
        return self.names[0] if len(self.names) == 1 else "combined_score"

    def compute(self, predictions, references) -> dict[str, float]:
        """Every metric of the task on the given predictions (class ids or scores) and references."""
        results = load_metric(self.config_name).compute(predictions=np.asarray(predictions),
                                                        references=np.asarray(references))
        results = {name: float(results[name]) for name in self.names}
        if len(results) > 1:
            results["combined_score"] = float(np.mean(list(results.values())))
        return results


def metric_spec(task_name: str | None, is_regression: bool) -> MetricSpec:
    """GLUE's metrics for a GLUE task; otherwise accuracy, or Pearson/Spearman for a regression."""
    config_name = task_name if task_name in TASK_METRICS else "regression" if is_regression else "classification"
    return MetricSpec(TASK_METRICS[config_name], is_regression=config_name in SCORES, config_name=config_name)
