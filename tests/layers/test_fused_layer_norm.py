import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.layers.fused_layer_norm import residual_layer_norm


def _values_and_gradients(norm, add_and_norm, residual, branch, upstream):
    with tf.GradientTape() as tape:
        tape.watch([residual, branch])
        outputs = add_and_norm(residual, branch)
    gradients = tape.gradient(outputs, [residual, branch, norm.gamma, norm.beta], upstream)
    return [outputs, *gradients]


@pytest.mark.parametrize("branch_dtype", ["float32", "bfloat16"])
def test_values_and_gradients_match_keras_layer_normalization(branch_dtype):
    rng = np.random.default_rng(0)
    norm = keras.layers.LayerNormalization(epsilon=1e-12)
    norm.build((None, 48))
    norm.gamma.assign(rng.normal(size=48))
    norm.beta.assign(rng.normal(size=48))
    residual = tf.constant(rng.normal(scale=2.0, size=[3, 7, 48]), tf.float32)
    branch = tf.cast(rng.normal(size=[3, 7, 48]), branch_dtype)
    upstream = tf.constant(rng.normal(size=[3, 7, 48]), tf.float32)

    expected = _values_and_gradients(
        norm, lambda r, b: norm(r + tf.cast(b, tf.float32)), residual, branch, upstream)
    got = _values_and_gradients(
        norm, tf.function(lambda r, b: residual_layer_norm(r, b, norm)), residual, branch,
        upstream)
    names = ["output", "residual gradient", "branch gradient", "gamma gradient", "beta gradient"]
    for name, g, e in zip(names, got, expected):
        assert g.dtype == e.dtype, name
        # The branch gradient is rounded to the branch's dtype in both.
        tolerance = 1e-2 if name == "branch gradient" and branch_dtype == "bfloat16" else 1e-4
        np.testing.assert_allclose(tf.cast(g, tf.float32), tf.cast(e, tf.float32),
                                   rtol=tolerance, atol=tolerance, err_msg=name)
