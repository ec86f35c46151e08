"""`dense_rows`: a Keras `Dense` layer applied to rows in the matmul form oneDNN runs fastest;
`dense_weights`: its kernel and bias in its compute dtype, for forms of one's own.

Example:
    >>> layer = keras.layers.Dense(4)
    >>> layer.build((None, 8))
    >>> dense_rows(layer, tf.ones([3, 8])).shape
    TensorShape([3, 4])
"""

import tensorflow as tf

from bert_tf.layers.onednn import amx_matmul_forms


def dense_rows(layer, rows, activation=None, training=False, fuse_activation=True):
    """`activation(layer(rows))` for 2-D `rows [positions, units_in]`, in the layer's compute
    dtype. `activation` is one grappler fuses into the matmul (the exact GELU), or None; with
    `fuse_activation=False` (and always in training) it runs after the matmul instead, in
    `matmul_plus_bias`'s form (pass one that runs well alone, `unfused_activation`).

    A 2-D MatMul followed by BiasAdd (and the exact GELU) is what TensorFlow's grappler
    remapper fuses into one oneDNN matmul with the bias and activation in its epilogue. Keras
    `Dense` on 3-D input runs `tensordot` (reshape, MatMul, reshape) then a broadcasting add,
    which cannot fuse: bias and GELU each cost another pass over the activations. Without an
    activation, `matmul_plus_bias` picks the form.
    """
    kernel, bias = dense_weights(layer)
    if activation is None or training or not fuse_activation:
        # Training's exact GELU is its own XLA loop (`unfused_activation`): grappler cannot
        # fuse an activation whose input the gradient needs.
        output = matmul_plus_bias(rows, kernel, bias, training)
        return output if activation is None else activation(output)
    return activation(_matmul_bias_add(rows, kernel, bias))


def dense_weights(layer):
    """`(kernel, bias)` of a built Keras `Dense` layer, cast to its compute dtype (under mixed
    precision the variables stay float32)."""
    return (tf.cast(layer.kernel, layer.compute_dtype),
            tf.cast(layer.bias, layer.compute_dtype))


def matmul_plus_bias(rows, kernel, bias=None, training=False, scale=1.0):
    """`(rows @ kernel + bias) * scale` for 2-D `rows` (`bias` None: the matmul alone; `scale`
    a Python float, in the AMX form at no cost: it is the multiply grappler fuses anyway).

    In bfloat16 on a CPU with AMX, as a 4-D batched matmul times a scalar 1 plus the bias:
    grappler fuses that into oneDNN's matmul primitive with the multiply and the add as
    post-ops, which runs on the AMX tiles, while MatMul + BiasAdd becomes oneDNN's inner
    product, which TensorFlow feeds weights in a plain layout and oneDNN then runs without AMX
    (`x64:gemm:jit`). Measured on a 2-vCPU Xeon with AMX (TF 2.21, best of 15): `[4096, 768] @
    [768, 768]` 4.6 -> 3.4 ms, `[4096, 768] @ [768, 3072]` 20.7 -> 15.4 ms, `[4096, 3072] @
    [3072, 768]` 13.8 -> 13.2 ms; BERT-base's bfloat16 forward 8 % faster. The 1 (or `scale`)
    comes through `unfoldable_scalar` so that grappler does not fold the multiply away. In
    float32 the inner product is the faster (no AMX either way), and without AMX the two run at
    the same rate at batch 32 x 128, so everything else keeps MatMul + BiasAdd, except
    inference on few rows known when traced (`few_bfloat16_rows`: batch 1), where the batched
    form is faster on any CPU.

    bfloat16 training writes the gradient out (`_with_dense_gradient`: 2-D matmuls, on the AMX
    tiles where the CPU has them, and a float32-accumulated column sum for the bias) under
    either form.
    On AMX it takes the batched form: TensorFlow's own gradient of it, the multiply's
    included, made bert_mini's pre-training step 4 % slower than MatMul + BiasAdd, the
    written-out one 5-6 % faster (74.7-75.6 -> 79.2-79.6 seq/s), and MiniLM's fine-tuning
    step 10 % faster at 32 x 16 tokens (136-140 -> 124 ms), 13 % at 32 x 32 (244-249 -> 214;
    2-vCPU Xeon with AMX, alternating processes).
    """
    if bias is None:
        product = tf.matmul(rows, kernel)
        return product if scale == 1.0 else product * scale
    forward = (_amx_matmul_plus_bias if amx_matmul_forms(rows.dtype, rows.shape[0], training)
               else _matmul_bias_add)
    if training and rows.dtype == tf.bfloat16:
        return _with_dense_gradient(forward, scale)(rows, kernel, bias)
    return forward(rows, kernel, bias, scale)


def unfoldable_scalar(value, dtype):
    """The scalar `value` as a tensor grappler does not fold away, even when it is 1: after a
    batched matmul, `product * unfoldable_scalar(1.0, dtype) + addend` is the pattern grappler
    fuses into `_MklFusedBatchMatMulV2` (the multiply and the add as oneDNN post-ops), while a
    bare `product + addend` stays a separate `AddV2`, and so does `product * 1.0 + addend`
    once grappler has removed the multiply."""
    return tf.raw_ops.PlaceholderWithDefault(input=tf.constant(value, dtype), shape=[])


def _matmul_bias_add(rows, kernel, bias, scale=1.0):
    """`(rows @ kernel + bias) * scale` in the form grappler fuses into oneDNN's inner
    product (the scale, if not 1, a multiply after it)."""
    output = tf.nn.bias_add(tf.matmul(rows, kernel), bias)
    return output if scale == 1.0 else output * scale


def _amx_matmul_plus_bias(rows, kernel, bias, scale=1.0):
    """`(rows @ kernel + bias) * scale` in the form grappler fuses into
    `_MklFusedBatchMatMulV2`."""
    # A reshape, not `rows[tf.newaxis, tf.newaxis]`: grappler fuses only when it knows the
    # rank, and it does not know the shape of what an XLA function returns (training's
    # LayerNorm and GELU), while Reshape's shape gives it.
    batched = tf.matmul(tf.reshape(rows, [1, 1, -1, kernel.shape[0]]),
                        kernel[tf.newaxis, tf.newaxis])
    bias = bias if scale == 1.0 else bias * scale
    return (batched * unfoldable_scalar(scale, rows.dtype)
            + bias[tf.newaxis, tf.newaxis, tf.newaxis])[0, 0]


def _with_dense_gradient(forward, scale=1.0):
    """`forward(rows, kernel, bias, scale)` (bfloat16) with the gradient of `(rows @ kernel +
    bias) * scale` written out: 2-D matmuls, and the bias's as a column sum, which TensorFlow
    accumulates in float32. `BiasAddGrad`, BiasAdd's own gradient, sums bfloat16 in bfloat16:
    on `[512, 1536]` of standard normals its column sums (up to 78) were off by up to 3.07
    against 0.23 for `reduce_sum` (bfloat16's rounding), and it took 548 against 344 us per
    call (`bench/bias_gradient_bfloat16.py`, AMX Xeon)."""

    @tf.custom_gradient
    def dense(rows, kernel, bias):
        def gradient(upstream):
            if scale != 1.0:
                upstream = upstream * scale
            return (tf.matmul(upstream, kernel, transpose_b=True),
                    tf.matmul(rows, upstream, transpose_a=True),
                    tf.reduce_sum(upstream, axis=0))
        return forward(rows, kernel, bias, scale), gradient

    return dense
