"""bfloat16 <-> float32 conversions written as integer ops, for the XLA loops of bfloat16
training on CPU (`fused_gelu`).

XLA's CPU backend converts bfloat16 one element at a time. bfloat16 is the top half of a
float32, so as integer ops the conversions vectorize: widening is a 16-bit shift, narrowing
adds the round-to-nearest-even bias and shifts back, the result bit for bit `tf.cast`'s (a NaN
stays a NaN). Measured on the exact GELU's XLA loops over `[512, 1536]` bfloat16 (MiniLM's
feed-forward at 32 x 16 tokens; 2-vCPU Xeon with AMX, one thread, 20 calls in a function,
best of 7): forward 0.99 -> 0.67 ms, backward 1.15 -> 0.73 ms. MiniLM's whole fine-tuning step
(bfloat16, one intra-op thread, same Xeon, both versions in one process taking turns, 12 rounds
of 4 steps): 32 x 8 tokens unchanged, 32 x 12 to 32 x 32 1-3 % faster. The residual
LayerNorm's loops (`residual_layer_norm`) keep `tf.cast`: there the integer form was no
faster (`[256-1024, 384]` forward and backward, within the 5 % run-to-run spread).

Only where no TPU is configured: there XLA converts natively, and 16-bit integers are not a
type every TPU op takes.

Example:
    >>> x = tf.constant([1.5, -2.0], tf.bfloat16)
    >>> widen(x)                   # float32 [1.5, -2.0]
    >>> narrow(widen(x) * 3, x.dtype)  # bfloat16 [4.5, -6.0]
"""

import tensorflow as tf

# The bits of a quiet NaN in bfloat16.
_BFLOAT16_NAN = 0x7FC0


def _integer_conversions(dtype):
    return tf.as_dtype(dtype) == tf.bfloat16 and not tf.config.list_logical_devices("TPU")


def widen(x):
    """`x` as float32 (`tf.cast`'s values)."""
    if not _integer_conversions(x.dtype):
        return tf.cast(x, tf.float32)
    bits = tf.cast(tf.bitcast(x, tf.uint16), tf.uint32)
    return tf.bitcast(tf.bitwise.left_shift(bits, 16), tf.float32)


def narrow(x, dtype):
    """float32 `x` as `dtype`, rounded to nearest even (`tf.cast`'s values)."""
    if not _integer_conversions(dtype):
        return tf.cast(x, dtype)
    bits = tf.bitcast(x, tf.uint32)
    rounding = tf.bitwise.bitwise_and(tf.bitwise.right_shift(bits, 16), 1) + 0x7FFF
    top = tf.cast(tf.bitwise.right_shift(bits + rounding, 16), tf.uint16)
    # The rounding would carry a NaN with a small payload into infinity.
    top = tf.where(tf.math.is_nan(x), tf.constant(_BFLOAT16_NAN, tf.uint16), top)
    return tf.bitcast(top, tf.bfloat16)
