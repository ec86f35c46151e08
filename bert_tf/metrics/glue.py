"""The GLUE benchmark's metrics: accuracy, F1, Matthews correlation, Pearson and Spearman.

Each matches the reference implementation GLUE's scorer uses (scikit-learn's `accuracy_score`,
`f1_score` (binary, positive label 1), `matthews_corrcoef`; SciPy's `pearsonr`, `spearmanr`)
without depending on them. `glue_metrics(task, labels, predictions)` reports the metrics of a
task the way the GLUE paper does (CoLA: Matthews; MRPC/QQP: F1 and accuracy; STS-B: Pearson
and Spearman; the rest: accuracy).

Example:
    >>> glue_metrics("MRPC", labels=[1, 0, 1, 1], predictions=[1, 0, 0, 1])
    {'accuracy': 0.75, 'f1': 0.8}
"""

import numpy as np


def _as_arrays(labels, predictions):
    labels, predictions = np.asarray(labels), np.asarray(predictions)
    if labels.ndim != 1 or labels.shape != predictions.shape:
        raise ValueError(f"labels and predictions must be 1-D and of one length, got shapes "
                         f"{labels.shape} and {predictions.shape}")
    if not labels.size:
        raise ValueError("labels and predictions are empty")
    # A label "1" read from a TSV file never equals the prediction 1: every score would be 0.
    for name, values in (("labels", labels), ("predictions", predictions)):
        if values.dtype.kind not in "biuf":
            raise ValueError(f"{name} must be numbers, got {values.dtype} values such as "
                             f"{values[0].item()!r}")
    return labels, predictions


def _class_ids(labels, predictions):
    """`_as_arrays`, refusing values that are not whole numbers: probabilities or logits given
    as predictions would equal no label."""
    labels, predictions = _as_arrays(labels, predictions)
    for name, values in (("labels", labels), ("predictions", predictions)):
        if np.any(values != np.round(values)):
            raise ValueError(f"{name} must be class ids (e.g. `logits.argmax(-1)`), got values "
                             f"such as {values[values != np.round(values)][0].item()!r}")
    return labels, predictions


def accuracy(labels, predictions):
    """The fraction of predictions equal to their label."""
    labels, predictions = _class_ids(labels, predictions)
    return float(np.mean(labels == predictions))


def f1(labels, predictions):
    """Binary F1 of the positive class 1; 0 when there are no positives at all (as sklearn)."""
    labels, predictions = _class_ids(labels, predictions)
    true_positives = np.sum((predictions == 1) & (labels == 1))
    # F1 = 2 TP / (2 TP + FP + FN); predicted + actual positives = 2 TP + FP + FN.
    denominator = np.sum(predictions == 1) + np.sum(labels == 1)
    return float(2 * true_positives / denominator) if denominator else 0.0


def matthews_corrcoef(labels, predictions):
    """Matthews correlation coefficient (CoLA's metric), in its multi-class form, which is the
    usual (TP*TN - FP*FN) / sqrt(...) for two classes; 0 when a side has a single class."""
    labels, predictions = _class_ids(labels, predictions)
    classes, encoded = np.unique(np.concatenate([labels, predictions]), return_inverse=True)
    confusion = np.zeros((len(classes), len(classes)), np.float64)
    np.add.at(confusion, (encoded[:len(labels)], encoded[len(labels):]), 1)
    true_counts, predicted_counts = confusion.sum(axis=1), confusion.sum(axis=0)
    num_samples, num_correct = confusion.sum(), np.trace(confusion)
    covariance = num_correct * num_samples - true_counts @ predicted_counts
    true_variance = num_samples ** 2 - true_counts @ true_counts
    predicted_variance = num_samples ** 2 - predicted_counts @ predicted_counts
    if true_variance * predicted_variance == 0:
        return 0.0
    return float(covariance / np.sqrt(true_variance * predicted_variance))


def pearson(labels, predictions):
    """Pearson's correlation coefficient; NaN when either side is constant (as SciPy)."""
    labels, predictions = _as_arrays(labels, predictions)
    x = labels.astype(np.float64) - labels.mean()
    y = predictions.astype(np.float64) - predictions.mean()
    norm = np.sqrt((x @ x) * (y @ y))
    return float(x @ y / norm) if norm else float("nan")


def _average_ranks(values):
    """1-based ranks, ties sharing the mean of the ranks they span (SciPy's `rankdata`)."""
    order = np.argsort(values, kind="stable")
    sorted_values = values[order]
    # Each run of equal values [start, end) gets rank (start + 1 + end) / 2.
    starts = np.flatnonzero(np.r_[True, sorted_values[1:] != sorted_values[:-1]])
    ends = np.r_[starts[1:], len(values)]
    ranks = np.empty(len(values), np.float64)
    ranks[order] = np.repeat((starts + 1 + ends) / 2.0, ends - starts)
    return ranks


def spearman(labels, predictions):
    """Spearman's rank correlation: Pearson's on average ranks."""
    labels, predictions = _as_arrays(labels, predictions)
    return pearson(_average_ranks(labels), _average_ranks(predictions))


_TASK_METRICS = {
    "cola": (matthews_corrcoef,),
    "sst2": (accuracy,),
    "mrpc": (accuracy, f1),
    "qqp": (accuracy, f1),
    "stsb": (pearson, spearman),
    "mnli": (accuracy,),
    "mnlimm": (accuracy,),
    "qnli": (accuracy,),
    "rte": (accuracy,),
    "wnli": (accuracy,),
    "ax": (matthews_corrcoef,),
}


def glue_task_key(name):
    """A GLUE task's name without case, "-" and "_", which all spellings share ("SST-2",
    "sst_2" -> "sst2")."""
    return name.lower().replace("-", "").replace("_", "")


def glue_metrics(task, labels, predictions):
    """{metric name: value} for a GLUE task ("CoLA", "SST-2", "MRPC", "STS-B", "MNLI-mm"...;
    case, "-" and "_" are ignored). `predictions` are class ids, or scores for STS-B."""
    key = glue_task_key(task)
    if key not in _TASK_METRICS:
        raise ValueError(f"Unknown GLUE task {task!r}; known: CoLA, SST-2, MRPC, QQP, STS-B, "
                         f"MNLI, MNLI-mm, QNLI, RTE, WNLI, AX")
    return {metric.__name__: metric(labels, predictions) for metric in _TASK_METRICS[key]}
