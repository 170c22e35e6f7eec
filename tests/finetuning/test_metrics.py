"""GLUE's metrics, computed offline by the ``evaluate`` module shipped in the package, against values worked out
by hand."""

import math
import socket

import evaluate
import pytest

from hf_effattn.finetuning.metrics import load_metric, metric_spec
from hf_effattn.metrics import list_metrics, metric_path

PREDICTED = [1, 0, 1, 1]
REFERENCE = [1, 0, 0, 1]  # TP 2, TN 1, FP 1, FN 0


def test_accuracy_of_the_single_metric_tasks():
    for task in ("sst2", "qnli", "rte", "wnli"):
        assert metric_spec(task, False).compute(PREDICTED, REFERENCE) == {"accuracy": 0.75}


def test_three_class_accuracy_for_mnli():
    assert metric_spec("mnli", False).compute([0, 1, 2, 2], [0, 1, 2, 0]) == {"accuracy": 0.75}


def test_matthews_correlation_for_cola():
    # (TP TN - FP FN) / sqrt((TP+FP)(TP+FN)(TN+FP)(TN+FN)) = (2 - 0) / sqrt(3 * 2 * 2 * 1)
    result = metric_spec("cola", False).compute(PREDICTED, REFERENCE)
    assert result == pytest.approx({"matthews_correlation": 2 / math.sqrt(12)})


def test_accuracy_and_f1_for_mrpc_and_qqp():
    # F1 of the positive class: precision 2/3, recall 1 -> 0.8
    for task in ("mrpc", "qqp"):
        result = metric_spec(task, False).compute(PREDICTED, REFERENCE)
        assert result == pytest.approx({"accuracy": 0.75, "f1": 0.8, "combined_score": 0.775})


def test_pearson_and_spearman_for_stsb():
    # x deviations -1.5 -.5 .5 1.5; y = [1, 3, 2, 40]: mean 11.5, deviations -10.5 -8.5 -9.5 28.5
    # Pearson = 58 / sqrt(5 * 1085); the ranks of y are 1 3 2 4, so Spearman = 4 / 5.
    spec = metric_spec("stsb", False)
    assert spec.is_regression
    pearson = 58 / math.sqrt(5 * 1085)
    result = spec.compute([1.0, 2.0, 3.0, 4.0], [1.0, 3.0, 2.0, 40.0])
    assert result == pytest.approx({"pearson": pearson, "spearmanr": 0.8, "combined_score": (pearson + 0.8) / 2})


def test_main_metric_is_the_single_metric_or_the_glue_average():
    assert metric_spec("cola", False).main == "matthews_correlation"
    assert metric_spec("sst2", False).main == "accuracy"
    assert metric_spec("stsb", False).main == "combined_score"
    assert metric_spec("qqp", False).main == "combined_score"


def test_other_datasets_get_accuracy_or_correlations():
    assert metric_spec(None, False).names == ("accuracy",)
    assert metric_spec(None, True).names == ("pearson", "spearmanr") and metric_spec(None, True).is_regression
    assert metric_spec(None, True).compute([1.0, 2.0, 3.0], [2.0, 4.0, 6.5])["spearmanr"] == pytest.approx(1.0)


def test_the_scripts_metrics_come_from_the_shipped_evaluate_module():
    metric = load_metric("mrpc")
    assert isinstance(metric, evaluate.EvaluationModule) and metric.name == "glue" and metric.config_name == "mrpc"
    assert list_metrics() == ["glue"]


@pytest.fixture
def no_network(monkeypatch):
    """Any attempt to open a network connection fails."""

    def refuse(*args, **kwargs):
        raise OSError("network access attempted")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def test_evaluate_loads_the_module_from_its_local_path_without_network(no_network):
    cola = evaluate.load(metric_path(), "cola", keep_in_memory=True)
    assert cola.compute(predictions=PREDICTED, references=REFERENCE) == pytest.approx(
        {"matthews_correlation": 2 / math.sqrt(12)})
    # Incremental use, as in an evaluation loop: batches added, then one compute.
    mrpc = evaluate.load(metric_path("glue"), "mrpc", keep_in_memory=True)
    mrpc.add_batch(predictions=PREDICTED[:2], references=REFERENCE[:2])
    mrpc.add_batch(predictions=PREDICTED[2:], references=REFERENCE[2:])
    assert mrpc.compute() == pytest.approx({"accuracy": 0.75, "f1": 0.8})


def test_unknown_metric_or_configuration_is_refused():
    with pytest.raises(ValueError, match=r"No metric module 'bleu' in hf_effattn; the shipped ones: glue"):
        metric_path("bleu")
    with pytest.raises(ValueError, match=r"Unknown configuration 'squad' of the glue metric: use one of cola"):
        evaluate.load(metric_path(), "squad", keep_in_memory=True)
