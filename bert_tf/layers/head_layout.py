"""`split_heads` / `merge_heads`: attention's moves between rows `[batch, seq, heads * size]` and
the head-major `[batch, heads, seq, size]` its matmuls take, as a transpose or as one gather.

TensorFlow hands every float transpose to oneDNN, whose reorder costs tens of microseconds
however small the tensor, more when it splits one across two threads; a gather of `size`-wide
slices costs a few. On few rows (a short text, a batch of one) that is the whole move: MiniLM's
`[1, 128, 12, 32]` 55 against 22 us in bfloat16, 49 against 14 in float32, with a multiply
that costs 16 / 8 us in the same chain (2-vCPU AMD EPYC of family 26, no AMX, two threads). An
encoder's forward, both forms in one process taking turns (median of 15-20 x 5 passes, three
processes), gather over transpose: MiniLM 1 x 128 0.95-0.97x float32, 0.93-0.97x mixed
bfloat16, 0.96-1.02x bfloat16 weights; 1 x 32 0.89-0.93x; 2 x 128 and 8 x 32 0.92-0.99x;
BERT-base 1 x 128 0.99-1.01x. Attention takes the gather in inference on fewer rows than
hidden units, where it projects the rows with 2-D matmuls (`BertSelfAttention._few_rows`);
training keeps the transpose, whose gradient is a transpose too (a gather's is a scatter).
`RealTokens.scatter_heads` does the same for a trimmed batch's real tokens, with the scatter to
the padded layout in the same gather.

Example:
    >>> x = tf.random.normal([2, 5, 12])
    >>> by_head = split_heads(x, heads=3, by_gather=True)  # [2, 3, 5, 4]
    >>> merge_heads(by_head, by_gather=True).shape
    TensorShape([2, 5, 12])
"""

import tensorflow as tf


def split_heads(rows, heads, by_gather=False):
    """`rows [batch, seq, heads * size]` -> `[batch, heads, seq, size]`."""
    batch, seq = tf.shape(rows)[0], tf.shape(rows)[1]
    size = rows.shape[-1] // heads
    if not by_gather:
        return tf.transpose(tf.reshape(rows, [batch, seq, heads, size]), [0, 2, 1, 3])
    # Position (b, h, s) takes slice h of row (b, s).
    index = ((tf.range(batch)[:, tf.newaxis, tf.newaxis] * seq
              + tf.range(seq)[tf.newaxis, tf.newaxis, :]) * heads
             + tf.range(heads)[tf.newaxis, :, tf.newaxis])
    return tf.gather(tf.reshape(rows, [-1, size]), index)


def merge_heads(by_head, by_gather=False):
    """`by_head [batch, heads, seq, size]` -> `[batch, seq, heads * size]`."""
    batch, seq = tf.shape(by_head)[0], tf.shape(by_head)[2]
    heads, size = by_head.shape[1], by_head.shape[-1]
    if not by_gather:
        merged = tf.transpose(by_head, [0, 2, 1, 3])
    else:
        # Slice (b, s, h) is row (b, h, s) of the head-major layout.
        index = ((tf.range(batch)[:, tf.newaxis, tf.newaxis] * heads
                  + tf.range(heads)[tf.newaxis, tf.newaxis, :]) * seq
                 + tf.range(seq)[tf.newaxis, :, tf.newaxis])
        merged = tf.gather(tf.reshape(by_head, [-1, size]), index)
    return tf.reshape(merged, [batch, seq, heads * size])
