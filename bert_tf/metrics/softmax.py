"""Softmax, log-softmax and cross-entropy of logits in NumPy, for scoring predictions on the
host (evaluation loss, answer probabilities) without a TensorFlow call per batch.

Computed in float64 after subtracting the row maximum, so large logits neither overflow nor
lose the small probabilities.

Example:
    >>> softmax([[0.0, 0.0]])
    array([[0.5, 0.5]])
    >>> round(cross_entropy([[0.0, 0.0]], [1]), 4)
    0.6931
"""

import numpy as np


def log_softmax(logits):
    """`log(softmax(logits))` over the last axis."""
    logits = np.asarray(logits, np.float64)
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def softmax(logits):
    """Probabilities over the last axis."""
    return np.exp(log_softmax(logits))


def cross_entropy(logits, labels):
    """The mean negative log-probability of `labels` (`[examples]` class indices) under
    `logits` (`[examples, classes]`): the loss `SparseCategoricalCrossentropy(from_logits=True)`
    trains with."""
    log_probabilities = log_softmax(logits)
    labels = np.asarray(labels)
    if log_probabilities.ndim != 2 or labels.shape != log_probabilities.shape[:1]:
        raise ValueError(f"logits must be [examples, classes] and labels [examples], got shapes "
                         f"{log_probabilities.shape} and {labels.shape}")
    return float(-log_probabilities[np.arange(len(labels)), labels].mean())
