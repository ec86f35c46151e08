"""`dense_rows`: a Keras `Dense` layer applied to rows in the matmul form oneDNN runs fastest;
`dense_weights`: its kernel and bias in its compute dtype, for forms of one's own.

Example:
    >>> layer = keras.layers.Dense(4)
    >>> layer.build((None, 8))
    >>> dense_rows(layer, tf.ones([3, 8])).shape
    TensorShape([3, 4])
"""

import tensorflow as tf

from bert_tf.layers.onednn import amx_matmul_forms, single_threaded_matmul
from bert_tf.thread_pools import cores_for_two_ops_at_once


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
    return _in_row_halves(lambda part: activation(_matmul_bias_add(part, kernel, bias)), rows,
                          kernel, training)


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
    if training and bias is not None and rows.dtype == tf.bfloat16:
        return _with_dense_gradient(_matmul_plus_bias_form(rows, training), scale)(
            rows, kernel, bias)

    if bias is None:
        product = _in_row_halves(lambda part: tf.matmul(part, kernel), rows, kernel, training)
        return product if scale == 1.0 else product * scale
    forward = _matmul_plus_bias_form(rows, training)
    if forward is _amx_matmul_plus_bias:  # a batched matmul: not one thread (`_in_row_halves`)
        return forward(rows, kernel, bias, scale)
    return _in_row_halves(lambda part: forward(part, kernel, bias, scale), rows, kernel,
                          training)


def _matmul_plus_bias_form(rows, training):
    """`matmul_plus_bias`' form for `rows`: the AMX one or MatMul + BiasAdd."""
    return (_amx_matmul_plus_bias if amx_matmul_forms(rows.dtype, rows.shape[0], training)
            else _matmul_bias_add)


# Rows of the smaller half (`_in_row_halves`).
MIN_HALF_ROWS = 8


def _in_row_halves(product, rows, kernel, training):
    """`product(rows)` for a matmul of `rows @ kernel`; in inference on rows known when traced,
    where TensorFlow would run that matmul on one thread with more in its pool
    (`single_threaded_matmul`), as two independent halves of the rows, which the inter-op pool
    runs side by side, concatenated (a split along the rows is a view, not a copy).

    For 2-D matmuls (MatMul, MatMul + BiasAdd) only: TensorFlow's batched matmul, the AMX
    form, takes every thread whatever its size. Where the matmul already runs on every thread,
    halves are no faster: a chain of `[128, 768] @ [768, 3072]` in bfloat16 took 1.58 ms per
    matmul whole and 1.68 in halves, the AMX form of MiniLM's `[128, 384] @ [384, 384]` 0.144
    against 0.168, while its 2-D form took 0.203 against 0.120 ms (float32 0.378 against 0.209,
    at 32 rows 0.121 against 0.067; 2-vCPU AMD EPYC of family 25, best of 100-200). MiniLM's
    float32 forward at batch 1 x 128 (its 24 projections in halves) took 17.4 against 18.8 ms
    (best of 150 passes; median 18.4 against 19.6, both forms in one process taking turns);
    in bfloat16 the projections take the AMX form and BERT-base's are on every thread.
    """
    count = rows.shape[0]
    if (training or count is None or count < 2 * MIN_HALF_ROWS
            or not single_threaded_matmul(count, kernel.shape[0], kernel.shape[1], rows.dtype)
            or not cores_for_two_ops_at_once()):
        return product(rows)
    return tf.concat([product(part) for part in tf.split(rows, [count // 2, count - count // 2])],
                     axis=0)


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
