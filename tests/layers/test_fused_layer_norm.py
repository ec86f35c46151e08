import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.layers.dropout import dropout_with_hashed_bits
from bert_tf.layers.fused_layer_norm import residual_layer_norm


def _values_and_gradients(norm, add_and_norm, residual, branch, upstream):
    with tf.GradientTape() as tape:
        tape.watch([residual, branch])
        outputs = add_and_norm(residual, branch)
    gradients = tape.gradient(outputs, [residual, branch, norm.gamma, norm.beta], upstream)
    return [outputs, *gradients]


@pytest.mark.parametrize("dropout_rate", [0.0, 0.3])
@pytest.mark.parametrize("branch_dtype", ["float32", "bfloat16"])
def test_values_and_gradients_match_keras_layer_normalization(branch_dtype, dropout_rate):
    """Against Keras' LayerNormalization of `residual + dropout(branch)`, the dropout being
    `dropout_with_hashed_bits` with the same seed (the fused loops must draw its mask)."""
    rng = np.random.default_rng(0)
    norm = keras.layers.LayerNormalization(epsilon=1e-12)
    norm.build((None, 48))
    norm.gamma.assign(rng.normal(size=48))
    norm.beta.assign(rng.normal(size=48))
    residual = tf.constant(rng.normal(scale=2.0, size=[3, 7, 48]), tf.float32)
    branch = tf.cast(rng.normal(size=[3, 7, 48]), branch_dtype)
    upstream = tf.constant(rng.normal(size=[3, 7, 48]), tf.float32)

    seed = tf.constant([7, 11])

    def dropped(b):
        return dropout_with_hashed_bits(b, dropout_rate, seed)

    expected = _values_and_gradients(
        norm, lambda r, b: norm(r + tf.cast(dropped(b), tf.float32)), residual, branch,
        upstream)
    got = _values_and_gradients(
        norm, tf.function(lambda r, b: residual_layer_norm(r, b, norm, dropout_rate, seed)),
        residual, branch, upstream)
    names = ["output", "residual gradient", "branch gradient", "gamma gradient", "beta gradient"]
    for name, g, e in zip(names, got, expected):
        assert g.dtype == e.dtype, name
        # The branch gradient is rounded to the branch's dtype in both.
        tolerance = 1e-2 if name == "branch gradient" and branch_dtype == "bfloat16" else 1e-4
        np.testing.assert_allclose(tf.cast(g, tf.float32), tf.cast(e, tf.float32),
                                   rtol=tolerance, atol=tolerance, err_msg=name)


def test_unknown_shape_drops_the_same_elements_as_the_fixed_one():
    """Fine-tuning traces its step with an unknown length: the loops compile per shape and
    must draw the same mask as when the shape is known."""
    norm = keras.layers.LayerNormalization(epsilon=1e-12)
    norm.build((None, 16))
    residual = tf.zeros([4, 16])
    branch = tf.ones([4, 16], tf.bfloat16)
    seed = tf.constant([1, 2])
    unknown = tf.function(lambda r, b: residual_layer_norm(r, b, norm, 0.5, seed),
                          input_signature=[tf.TensorSpec([None, 16]),
                                           tf.TensorSpec([None, 16], tf.bfloat16)])
    kept = dropout_with_hashed_bits(branch, 0.5, seed).numpy() != 0
    assert 0 < kept.mean() < 1
    np.testing.assert_allclose(unknown(residual, branch),
                               norm(tf.cast(dropout_with_hashed_bits(branch, 0.5, seed),
                                            tf.float32)), atol=1e-5)


def test_rate_one_drops_the_whole_branch():
    norm = keras.layers.LayerNormalization(epsilon=1e-12)
    norm.build((None, 8))
    residual = tf.constant(np.arange(16, dtype=np.float32).reshape(2, 8))
    got = residual_layer_norm(residual, tf.ones([2, 8], tf.bfloat16), norm, 1.0,
                              tf.constant([3, 4]))
    np.testing.assert_allclose(got, norm(residual), atol=1e-5)
