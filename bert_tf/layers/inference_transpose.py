"""`inference_transpose`: `tf.transpose` for the attention's head reorders in inference, by
TensorFlow's own kernel where oneDNN's costs more.

With oneDNN on, TensorFlow runs every float32 and bfloat16 transpose as a oneDNN reorder
(`_MklTranspose`), which costs ~40 us more per call than TensorFlow's own (Eigen) transpose on
the small tensors of short texts, and is not faster on large ones. Integer transposes stay on
Eigen, so `inference_transpose` moves the bits as integers of the same width (bitcasts copy nothing).
Measured per transpose `[batch, seq, heads, head_size] -> [batch, heads, seq, head_size]`, a
chain of 12 in a `tf.function`, best of 5 (2-vCPU Xeon with AMX, float32): `[1, 16, 12, 32]`
75 -> 27 us, `[8, 32, 12, 32]` 119 -> 66 us, `[1, 128, 12, 64]` 245 -> 87 us, `[32, 128, 12,
64]` 1538 -> 1239 us. A MiniLM layer reorders heads four times per call.

Only on a CPU with oneDNN and no TPU, and only in inference: elsewhere `tf.transpose` is the
fast one (and 16-bit integers are not a type every TPU op takes).

Example:
    >>> x = tf.random.normal([2, 5, 4, 8])
    >>> inference_transpose(x, [0, 2, 1, 3]).shape     # TensorShape([2, 4, 5, 8]), tf.transpose's values
"""

import tensorflow as tf

from bert_tf.layers.onednn import onednn_enabled

_SAME_WIDTH_INTEGER = {tf.float32: tf.int32, tf.bfloat16: tf.int16, tf.float16: tf.int16}


def inference_transpose(x, perm):
    """`tf.transpose(x, perm)`, by Eigen's kernel when oneDNN would take it (see the module).
    For inference: the bitcasts have no gradient. (With a written-out gradient, training was
    no faster: MiniLM's step at 32 x 16 tokens 69.0 -> 72.4 ms in float32, 39.9 -> 40.1 in
    bfloat16.)"""
    integer = _SAME_WIDTH_INTEGER.get(x.dtype)
    if integer is None or not onednn_enabled() or tf.config.list_logical_devices("TPU"):
        return tf.transpose(x, perm)
    return tf.bitcast(tf.transpose(tf.bitcast(x, integer), perm), x.dtype)
