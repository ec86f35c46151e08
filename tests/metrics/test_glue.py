import math

import numpy as np
import pytest

from bert_tf.metrics.glue import (
    accuracy, f1, glue_metrics, matthews_corrcoef, pearson, spearman)
from tests.resources import shared_data_path


def test_accuracy_and_binary_f1():
    assert accuracy([1, 0, 1, 1], [1, 0, 0, 1]) == 0.75
    # TP 2, FP 0, FN 1: F1 = 4 / 5.
    assert f1([1, 0, 1, 1], [1, 0, 0, 1]) == pytest.approx(0.8)
    assert f1([0, 0], [0, 0]) == 0.0


def test_matthews_correlation():
    # TP 3, TN 3, FP 1, FN 1: (9 - 1) / sqrt(4 * 4 * 4 * 4).
    assert matthews_corrcoef([1, 1, 1, 0, 0, 0, 1, 0], [1, 1, 0, 0, 0, 1, 1, 0]) == \
        pytest.approx(0.5)
    # Multi-class form: counts t = [2, 1, 1], p = [2, 0, 2], 3 of 4 correct:
    # (3*4 - 6) / sqrt((16 - 6) * (16 - 8)).
    assert matthews_corrcoef([0, 1, 2, 0], [0, 2, 2, 0]) == pytest.approx(6 / math.sqrt(80))
    assert matthews_corrcoef([1, 0, 1], [1, 1, 1]) == 0.0      # one predicted class: undefined
    assert matthews_corrcoef([1, 0, 1], [0, 1, 0]) == pytest.approx(-1.0)


def test_pearson_and_spearman():
    # dx = [-1.5, -.5, .5, 1.5], dy = [-3, -1, 0, 4]: 11 / sqrt(5 * 26).
    assert pearson([1, 2, 3, 4], [2, 4, 5, 9]) == pytest.approx(11 / math.sqrt(130))
    # Tied values share their mean rank: [1, 2.5, 2.5, 4] vs [1, 2, 3, 4].
    assert spearman([1, 2, 2, 3], [10, 20, 30, 40]) == pytest.approx(4.5 / math.sqrt(22.5))
    assert spearman([1, 2, 3], [1, 8, 27]) == pytest.approx(1.0)
    assert math.isnan(pearson([1, 1, 1], [1, 2, 3]))


def test_glue_metrics_per_task_and_errors():
    assert glue_metrics("MRPC", [1, 0, 1, 1], [1, 0, 0, 1]) == pytest.approx(
        {"accuracy": 0.75, "f1": 0.8})
    assert set(glue_metrics("sts-b", [0.0, 2.5, 5.0], [1.0, 2.0, 4.0])) == {"pearson", "spearman"}
    assert set(glue_metrics("CoLA", [0, 1], [0, 1])) == {"matthews_corrcoef"}
    assert set(glue_metrics("MNLI-mm", [0, 1], [0, 1])) == {"accuracy"}
    with pytest.raises(ValueError, match="Unknown GLUE task 'SQuAD'"):
        glue_metrics("SQuAD", [0], [0])
    with pytest.raises(ValueError, match=r"got shapes \(3,\) and \(2,\)"):
        accuracy([0, 1, 1], [0, 1])
    with pytest.raises(ValueError, match="empty"):
        accuracy([], [])


def test_labels_and_predictions_that_cannot_match_are_named():
    # They scored 0 without a word: labels read from a TSV file as strings, probabilities
    # instead of class ids.
    with pytest.raises(ValueError, match="labels must be numbers, got <U1 values such as '1'"):
        glue_metrics("MRPC", ["1", "0"], [1, 0])
    with pytest.raises(ValueError, match=r"predictions must be class ids \(e.g. "
                                         r"`logits.argmax\(-1\)`\), got values such as 0.9"):
        glue_metrics("SST-2", [1, 0], [0.9, 0.2])
    assert glue_metrics("CoLA", [1.0, 0.0], np.array([1, 0], np.int64)) == {
        "matthews_corrcoef": 1.0}
    assert glue_metrics("STS-B", [0.5, 2.5, 4.0], [1.2, 2.0, 4.5])["spearman"] == 1.0


def test_real_mrpc_majority_baseline():
    with open(shared_data_path("MRPC/dev.tsv"), encoding="utf-8-sig") as f:
        labels = np.array([int(line.split("\t")[0]) for line in list(f)[1:]])
    assert len(labels) == 408
    # GLUE's majority-class baseline on MRPC dev: F1 81.2, accuracy 68.4.
    result = glue_metrics("MRPC", labels, np.ones_like(labels))
    assert result == pytest.approx({"accuracy": 279 / 408, "f1": 2 * 279 / (279 + 408)})
    assert round(100 * result["f1"], 1) == 81.2 and round(100 * result["accuracy"], 1) == 68.4
