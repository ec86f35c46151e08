import numpy as np
import pytest
import tensorflow as tf

from bert_tf.layers.inference_transpose import inference_transpose


@pytest.mark.parametrize("dtype", [tf.float32, tf.bfloat16, tf.float16, tf.int64])
def test_inference_transpose_moves_every_bit_as_tf_transpose_does(dtype):
    values = tf.random.normal([2, 5, 3, 4], seed=0)
    if dtype.is_floating:  # special values must keep their bits too
        values = tf.tensor_scatter_nd_update(
            values, [[0, 0, 0, 0], [0, 0, 0, 1], [0, 0, 0, 2]], [np.inf, -0.0, np.nan])
    x = tf.cast(values * 100, dtype)
    for perm in ([0, 2, 1, 3], [1, 0, 2, 3], [3, 2, 1, 0]):
        ours = tf.function(inference_transpose)(x, perm)
        assert ours.dtype == dtype and ours.shape == tf.transpose(x, perm).shape
        width = {2: np.uint16, 4: np.uint32, 8: np.uint64}[dtype.size]
        np.testing.assert_array_equal(ours.numpy().view(width),
                                      tf.transpose(x, perm).numpy().view(width))
