import numpy as np
import pytest
import tensorflow as tf

from bert_tf.layers.weighted_layer_sum import WeightedLayerSum
from tests.harness import check_layer


def test_layer_contract():
    check_layer(WeightedLayerSum, {"num_layers": 3}, call_args=(tf.random.normal([2, 5, 3, 4]),),
                expected_shape=(2, 5, 4))


def test_starts_as_the_mean_and_mixes_with_softmax_weights():
    stacked = np.random.default_rng(0).normal(size=(2, 4, 3, 8)).astype(np.float32)
    layer = WeightedLayerSum(num_layers=3)
    np.testing.assert_allclose(layer(stacked), stacked.mean(axis=2), atol=1e-6)
    logits = np.array([1.0, -2.0, 0.5], np.float32)
    layer.layer_weights.assign(logits)
    weights = np.exp(logits) / np.exp(logits).sum()
    np.testing.assert_allclose(layer(stacked), np.einsum("bslh,l->bsh", stacked, weights),
                               atol=1e-6)


def test_wrong_number_of_layers_is_a_clear_error():
    with pytest.raises(ValueError, match="expected 3 layers on axis -2, got input shape"):
        WeightedLayerSum(num_layers=3)(tf.zeros([1, 2, 4, 8]))
    with pytest.raises(ValueError, match="num_layers must be a positive integer, got 0"):
        WeightedLayerSum(num_layers=0)
