"""`inference_layer_norm`: a Keras `LayerNormalization` in the form oneDNN runs as one kernel.

Keras' LayerNorm is seven TensorFlow ops (two means, a squared difference, a rsqrt, three
multiply/adds), each a pass over the activations. TensorFlow's grappler remapper replaces one
specific form with oneDNN's single-pass `_MklLayerNorm`: the rows reshaped to the channels of an
NCHW `FusedBatchNormV3` in training mode (per-row mean and variance) with unit scale and zero
offset made by `Fill`, reshaped back, times gamma plus beta (the form tf_keras' layer used).
Measured on a 2-vCPU Intel Xeon with AMX (TF 2.21), one `[4096, 768]` float32 call with the
residual add before it, best of 20 x 10: Keras 7.2 ms, this 2.8 ms (the LayerNorm kernel alone
0.7 ms).

Two details keep the rewrite firing and the values Keras':
  * The row count goes through `PlaceholderWithDefault`: with static shapes grappler would
    otherwise constant-fold the `Fill`s into constants, and the remapper only matches `Fill`.
  * The op is called directly: `tf.compat.v1.nn.fused_batch_norm` raises epsilon to at least
    1.001e-5 (a limit of old cuDNN versions), while BERT's is 1e-12; with hidden states of
    variance ~1e-3 (freshly initialised embeddings) that would change outputs by ~1 %.

oneDNN's kernel costs ~100 us a call whatever its size, so below `MIN_FUSED_ELEMENTS` (the
crossover measured on the same machine, for 384 and 768 hidden units: Keras 134 / fused 201 us
at 49,152 elements, 463 / 332 us at 98,304) Keras' ops run instead: serving one short text
has ~25 rows. The size is the one known when traced, unknown dimensions counted as 1: a
`tf.cond` deciding per call cost ~80 us per LayerNorm, 10 % of a MiniLM forward on one short
text, so serving's real-token rows (`[None, hidden]`) keep Keras' ops, while
`[None, 128, 768]` (a padded batch of any size) takes the kernel.

Without oneDNN (another CPU build, GPU, TPU) the graph runs as `FusedBatchNormV3`, which
computes the same per-row moments. For inference only: training keeps Keras' layer (or
`residual_layer_norm`), whose gradients the optimisers and XLA know.

Example:
    >>> norm = keras.layers.LayerNormalization(epsilon=1e-12)
    >>> norm.build((None, 8))
    >>> inference_layer_norm(tf.random.normal([3, 8]), norm).shape
    TensorShape([3, 8])
"""

import math

import tensorflow as tf


MIN_FUSED_ELEMENTS = 65536


def inference_layer_norm(inputs, layer_norm, min_rows=1):
    """`layer_norm(inputs)` for float32 `inputs [..., hidden]` (rank 2 or 3) and a built Keras
    `LayerNormalization` over the last axis, with its gamma, beta and epsilon. `min_rows`: a
    lower bound on the rows the caller knows where the static shape lost it (a `[None, 128,
    hidden]` batch reshaped to `[None, hidden]` rows still has at least 128)."""
    rows = max(known_rows(inputs.shape), min_rows)
    if rows * inputs.shape[-1] >= MIN_FUSED_ELEMENTS:
        return _fused_layer_norm(inputs, layer_norm)
    return layer_norm(inputs)


def known_rows(shape):
    """The rows of `shape [..., hidden]` as known when traced, an unknown dimension counted
    as 1: `[None, 128, 768]` has at least 128."""
    return math.prod(size or 1 for size in shape[:-1])


def _fused_layer_norm(inputs, layer_norm):
    shape = tf.shape(inputs)
    hidden = inputs.shape[-1]
    rows = tf.raw_ops.PlaceholderWithDefault(input=tf.reduce_prod(shape[:-1]), shape=[])
    no_moments = tf.constant([], tf.float32)
    normalized = tf.raw_ops.FusedBatchNormV3(
        x=tf.reshape(inputs, [1, rows, hidden, 1]), scale=tf.fill([rows], 1.0),
        offset=tf.fill([rows], 0.0), mean=no_moments, variance=no_moments,
        epsilon=float(layer_norm.epsilon), data_format="NCHW", is_training=True).y
    return tf.reshape(normalized, shape) * layer_norm.gamma + layer_norm.beta
