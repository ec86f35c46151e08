"""Inference on a batch's real tokens only: the dense layers skip the padding.

A batch of texts packed to its longest one is mostly padding when lengths vary: eight SST-2
sentences packed to their longest (rounded up to 8) hold 355 positions for 201 tokens. Under
`real_tokens_only()`, `BertTransformerBlock` runs every dense layer (the Q/K/V and output
projections, the feed-forward network) and both LayerNorms on the rows of the real tokens
(`input_mask` 1) alone; only the attention scores, which need the `[batch, seq]` layout, see
the padded batch. The real tokens' outputs equal the padded computation's (up to float
round-off); the outputs at padding positions are 0 instead of the values nobody reads.

The scope is read when a function is traced, so it decides what the traced graph computes; it
has no effect in training. Task exports trace their serving functions under it (see
`bert_tf.export.task_export`).

Example:
    >>> with real_tokens_only():
    ...     outputs = encoder(inputs, training=False)   # sequence_output 0 at padding
"""

import tensorflow as tf

from bert_tf.layers.trace_scope import TraceScope

_SCOPE = TraceScope()


def real_tokens_only():
    """Encoders called (traced) inside run their dense layers on real tokens only."""
    return _SCOPE.entered()


def real_tokens_only_enabled():
    """Whether the calling thread is inside `real_tokens_only()`."""
    return _SCOPE.active()


class RealTokens:
    """Where a batch's real tokens are: moves tensors between the padded layout
    `[batch, seq, depth]` (or attention's `[batch, heads, seq, size]`) and rows of real tokens
    `[tokens, depth]` (in batch-major order).

    Example:
        >>> tokens = RealTokens(tf.constant([[1, 1, 0], [1, 0, 0]]))
        >>> rows = tokens.gather(tf.reshape(tf.range(6.0), [2, 3, 1]))   # [[0.], [1.], [3.]]
        >>> tokens.scatter(rows)[..., 0]                                  # [[0, 1, 0], [3, 0, 0]]
    """

    def __init__(self, input_mask):
        shape = tf.shape(input_mask, out_type=tf.int64)
        self._batch, self._seq = shape[0], shape[1]
        real = tf.reshape(input_mask, [-1]) > 0
        self._indices = tf.where(real)  # [tokens, 1]
        # For `scatter`: each position's row, padding pointing one past the last (a zero row).
        self._rows_at = tf.where(real, tf.cumsum(tf.cast(real, tf.int64)) - 1,
                                 tf.shape(self._indices, out_type=tf.int64)[0])

    def gather(self, padded):
        """`[batch, seq, depth]` -> the real tokens' rows `[tokens, depth]`."""
        return tf.gather_nd(tf.reshape(padded, [self._batch * self._seq, padded.shape[-1]]),
                            self._indices)

    def scatter(self, rows):
        """Rows `[tokens, depth]` -> `[batch, seq, depth]`, 0 at padding positions.

        A gather from the rows and one zero row, not `tf.scatter_nd` (which fills zeros, then
        writes): `[25, 384]` into `[32, 384]` 37 -> 10 us, `[2808, 768]` into `[4096, 768]`
        3.1 -> 1.3 ms (2-vCPU Xeon with AMX, 12 in a `tf.function`, best of 7)."""
        padded = tf.gather(_with_a_zero_row(rows), self._rows_at)
        return tf.reshape(padded, tf.stack([self._batch, self._seq, rows.shape[-1]]))

    def scatter_heads(self, rows, heads):
        """Rows `[tokens, heads * size]` -> `[batch, heads, seq, size]` (attention's head-major
        layout), 0 at padding positions: `scatter` and the heads' transpose as one gather of
        `size`-wide slices.

        Why one gather: oneDNN's transposes cost tens of microseconds however small (see
        `bert_tf.layers.head_layout`), even on a short text's `[1, 25, 12, 32]`, and attention
        moves four tensors per layer. The real MiniLM SST-2
        classifier export, one dev sentence per call, p50 11.6 -> 10.2 and 11.7 -> 10.5 ms
        (two intra-op threads, TensorFlow's default; 11.6 -> 11.0 on one); batches of 8 and 32
        SST-2 sentences or ~128-token texts 0.93-1.05x, within the spread (2-vCPU Xeon with
        AMX, both exports in one process taking turns)."""
        size = rows.shape[-1] // heads
        slices = tf.reshape(_with_a_zero_row(rows), [-1, size])
        # Position (b, h, s) takes slice h of the row at (b, s).
        index = (tf.reshape(self._rows_at, tf.stack([self._batch, 1, self._seq])) * heads
                 + tf.range(heads, dtype=tf.int64)[:, tf.newaxis])
        return tf.gather(slices, index)

    def gather_heads(self, by_head):
        """`[batch, heads, seq, size]` -> the real tokens' rows `[tokens, heads * size]`: the
        heads' transpose back and `gather` as one gather of `size`-wide slices."""
        heads, size = by_head.shape[1], by_head.shape[-1]
        position = self._indices[:, 0]
        batch, seq = position // self._seq, position % self._seq
        # Token (b, s) takes slice (b, h, s) for each head h.
        index = ((batch[:, tf.newaxis] * heads + tf.range(heads, dtype=tf.int64)) * self._seq
                 + seq[:, tf.newaxis])
        return tf.reshape(tf.gather(tf.reshape(by_head, [-1, size]), index), [-1, heads * size])


def _with_a_zero_row(rows):
    """`rows [tokens, depth]` and one row of zeros after them, where padding positions point."""
    return tf.concat([rows, tf.zeros([1, rows.shape[-1]], rows.dtype)], 0)
