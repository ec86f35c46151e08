"""`dense_rows`: a Keras `Dense` layer applied to rows as MatMul + BiasAdd."""

import tensorflow as tf


def dense_rows(layer, rows):
    """`layer(rows)` for 2-D `rows [positions, units_in]`, in the layer's compute dtype.

    A 2-D MatMul followed by BiasAdd (and the exact GELU) is what TensorFlow's grappler
    remapper fuses into one oneDNN matmul with the bias and activation in its epilogue. Keras
    `Dense` on 3-D input runs `tensordot` (reshape, MatMul, reshape) then a broadcasting add,
    which cannot fuse: bias and GELU each cost another pass over the activations.

    Example:
        >>> layer = keras.layers.Dense(4)
        >>> layer.build((None, 8))
        >>> dense_rows(layer, tf.ones([3, 8])).shape
        TensorShape([3, 4])
    """
    return tf.nn.bias_add(tf.matmul(rows, tf.cast(layer.kernel, layer.compute_dtype)),
                          tf.cast(layer.bias, layer.compute_dtype))
