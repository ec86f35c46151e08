import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.layers.inference_layer_norm import MIN_FUSED_ELEMENTS, inference_layer_norm
from bert_tf.layers.onednn import onednn_enabled
from tests.optimized_graph import optimized_op_types


def _layer_norm(hidden, epsilon=1e-12, seed=0):
    rng = np.random.default_rng(seed)
    norm = keras.layers.LayerNormalization(epsilon=epsilon)
    norm.build((None, hidden))
    norm.gamma.assign(rng.normal(size=hidden))
    norm.beta.assign(rng.normal(size=hidden))
    return norm


# Below and above MIN_FUSED_ELEMENTS (65,536): Keras' ops, oneDNN's kernel.
@pytest.mark.parametrize("shape", [[6, 48], [2, 3, 48], [0, 48], [1400, 48], [2, 700, 48]])
@pytest.mark.parametrize("scale", [3.0, 1e-3])
def test_equals_keras_layer_normalization(shape, scale):
    # scale 1e-3: a variance of ~1e-6, where BERT's epsilon of 1e-12 (not fused_batch_norm's
    # 1.001e-5 floor) decides the output.
    norm = _layer_norm(48)
    rng = np.random.default_rng(1)
    x = tf.constant(rng.normal(loc=2 * scale, scale=scale, size=shape), tf.float32)
    expected = norm(x)
    for dynamic in (False, True):  # dynamic: Keras' ops unless the known sizes decide
        signature = [tf.TensorSpec([None] * (len(shape) - 1) + [48])] if dynamic else None
        got = tf.function(lambda x: inference_layer_norm(x, norm), input_signature=signature)(x)
        assert got.shape == expected.shape
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_a_larger_epsilon_is_used_too():
    norm = _layer_norm(16, epsilon=0.5)
    x = tf.random.stateless_normal([4096, 16], seed=[2, 0])
    np.testing.assert_allclose(inference_layer_norm(x, norm), norm(x), rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(not onednn_enabled(), reason="the fusion is oneDNN's")
@pytest.mark.parametrize("shape", [[1400, 48], [2, 700, 48]])
def test_runs_as_one_onednn_layer_norm_with_static_shapes(shape):
    # Static shapes are the case the PlaceholderWithDefault is there for.
    norm = _layer_norm(48)
    ops = optimized_op_types(lambda x: inference_layer_norm(x, norm), tf.ones(shape))
    assert ops["_MklLayerNorm"] == 1, ops
    assert not {"FusedBatchNormV3", "Mean", "Mul"} & set(ops), ops


@pytest.mark.skipif(not onednn_enabled(), reason="the fusion is oneDNN's")
@pytest.mark.parametrize("shape, signature, min_rows, fused", [
    ([6, 48], None, 1, False),                     # small
    ([1400, 48], [None, 48], 1, False),            # big, but not known to be when traced
    ([2, 1400, 48], [None, 1400, 48], 1, True),    # any batch of these is big
    ([2800, 48], [None, 48], 1400, True),          # the same as rows, the caller knowing
])
def test_the_kernel_runs_where_it_is_known_to_be_faster(shape, signature, min_rows, fused):
    norm = _layer_norm(48)
    spec = None if signature is None else [tf.TensorSpec(signature)]
    traced = tf.function(lambda x: inference_layer_norm(x, norm, min_rows),
                         input_signature=spec)
    ops = optimized_op_types(traced, tf.ones(shape))
    assert (ops["_MklLayerNorm"] == 1) == fused and (ops["Mean"] == 0) == fused, ops
    assert 6 * 48 < MIN_FUSED_ELEMENTS <= 1400 * 48
