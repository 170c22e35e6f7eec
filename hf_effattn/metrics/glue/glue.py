"""GLUE's metrics, as its benchmark defines them per task, as an ``evaluate`` module (standalone: it imports
only evaluate, datasets, scikit-learn and SciPy, since ``evaluate.load`` copies it out of the package).

* CoLA, and the diagnostic set AX: Matthews correlation (for AX's three classes, its multi-class form R_3);
* STS-B: Pearson and Spearman correlations of the predicted and the reference scores;
* MRPC and QQP: accuracy and F1 of the positive class (label 1);
* SST-2, MNLI (matched, mismatched), QNLI, RTE, WNLI: accuracy.

Two more configurations serve other datasets: ``classification`` (accuracy) and ``regression`` (Pearson and
Spearman, as STS-B).
"""

import datasets
import evaluate
from scipy.stats import pearsonr, spearmanr
from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef

CITATION = """\
@inproceedings{wang2019glue,
  title={{GLUE}: A Multi-Task Benchmark and Analysis Platform for Natural Language Understanding},
  author={Wang, Alex and Singh, Amanpreet and Michael, Julian and Hill, Felix and Levy, Omer and Bowman, Samuel R.},
  booktitle={International Conference on Learning Representations},
  year={2019}
}
"""

DESCRIPTION = "GLUE's metric(s) for each of its tasks, plus accuracy or correlations for other datasets."

INPUTS_DESCRIPTION = """
Args:
    predictions: predicted class ids, or predicted scores for ``stsb`` and ``regression``.
    references: the reference class ids or scores, one per prediction.
Returns: for ``cola`` and ``ax`` ``matthews_correlation``; for ``stsb`` and ``regression`` ``pearson`` and
    ``spearmanr``; for ``mrpc`` and ``qqp`` ``accuracy`` and ``f1``; otherwise ``accuracy``.
Example:
    >>> metric = evaluate.load(hf_effattn.metrics.metric_path(), "mrpc")
    >>> metric.compute(predictions=[1, 0, 1, 1], references=[1, 0, 0, 1])
    {'accuracy': 0.75, 'f1': 0.8}
"""

TASK_METRICS = {
    "cola": ("matthews_correlation",),
    "ax": ("matthews_correlation",),
    "stsb": ("pearson", "spearmanr"),
    "regression": ("pearson", "spearmanr"),
    "mrpc": ("accuracy", "f1"),
    "qqp": ("accuracy", "f1"),
    **{task: ("accuracy",) for task in ("sst2", "mnli", "mnli_matched", "mnli_mismatched", "qnli", "rte", "wnli",
                                        "classification")},
}
SCORES = ("stsb", "regression")

METRIC_FUNCTIONS = {
    "accuracy": lambda predictions, references: accuracy_score(references, predictions),
    "f1": lambda predictions, references: f1_score(references, predictions),
    "matthews_correlation": lambda predictions, references: matthews_corrcoef(references, predictions),
    "pearson": lambda predictions, references: pearsonr(predictions, references)[0],
    "spearmanr": lambda predictions, references: spearmanr(predictions, references)[0],
}


@evaluate.utils.file_utils.add_start_docstrings(DESCRIPTION, INPUTS_DESCRIPTION)
class Glue(evaluate.Metric):
    """GLUE's metrics; the configuration name is the task."""

    def _info(self):
        if self.config_name not in TASK_METRICS:
            raise ValueError(f"Unknown configuration {self.config_name!r} of the glue metric: use one of "
                             f"{', '.join(TASK_METRICS)}, e.g. evaluate.load(path, 'cola').")
        value = datasets.Value("float64" if self.config_name in SCORES else "int64")
        return evaluate.MetricInfo(
            description=DESCRIPTION,
            citation=CITATION,
            inputs_description=INPUTS_DESCRIPTION,
            features=datasets.Features({"predictions": value, "references": value}),
            reference_urls=["https://gluebenchmark.com/"],
        )

    def _compute(self, predictions, references):
        return {name: float(METRIC_FUNCTIONS[name](predictions, references))
                for name in TASK_METRICS[self.config_name]}
