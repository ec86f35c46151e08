import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.metrics.softmax import cross_entropy, log_softmax, softmax


def test_it_agrees_with_tensorflow_and_the_training_loss():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(7, 5)).astype(np.float32) * 4
    labels = rng.integers(0, 5, size=7)
    np.testing.assert_allclose(softmax(logits), tf.nn.softmax(logits).numpy(), rtol=1e-5)
    np.testing.assert_allclose(log_softmax(logits), tf.nn.log_softmax(logits).numpy(),
                               rtol=1e-5, atol=1e-6)
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)(labels, logits)
    assert cross_entropy(logits, labels) == pytest.approx(float(loss), rel=1e-5)


def test_huge_logits_neither_overflow_nor_round_small_probabilities_to_zero():
    logits = np.array([[1000.0, 0.0, -1000.0], [5e4, 5e4 - 30, 5e4 - 30]])
    probabilities = softmax(logits)
    assert np.isfinite(probabilities).all()
    np.testing.assert_allclose(probabilities.sum(-1), 1.0)
    assert probabilities[1, 1] == pytest.approx(np.exp(-30) / (1 + 2 * np.exp(-30)))
    expected = (2000.0 + np.log1p(2 * np.exp(-30))) / 2
    assert cross_entropy(logits, [2, 0]) == pytest.approx(expected)


@pytest.mark.parametrize("logits, labels", [([0.0, 1.0], [1]), ([[0.0, 1.0]], [1, 0]),
                                            ([[0.0, 1.0]], [[1]])])
def test_mismatched_shapes_are_refused(logits, labels):
    with pytest.raises(ValueError, match="logits must be"):
        cross_entropy(logits, labels)
