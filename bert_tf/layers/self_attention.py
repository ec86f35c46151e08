"""`BertSelfAttention`: multi-head scaled dot-product self-attention with a padding mask."""

import math

import keras
import tensorflow as tf

from bert_tf.layers.dense_rows import (dense_rows, dense_weights, matmul_plus_bias,
                                      unfoldable_scalar)
from bert_tf.layers.dropout import BertDropout
from bert_tf.layers.head_layout import merge_heads, split_heads
from bert_tf.layers.initializers import truncated_normal
from bert_tf.layers.onednn import amx_bfloat16_matmuls, onednn_enabled


@keras.saving.register_keras_serializable(package="bert_tf")
class BertSelfAttention(keras.layers.Layer):
    """Self-attention over `[batch, seq, hidden]` with separate query/key/value projections.

    The projections keep Google's `[hidden, hidden]` kernels (`attention/self/{query,key,value}`),
    so checkpoints map one to one. Under mixed precision the softmax computes in float32: the
    additive mask (-10000 on padding, as in Google's BERT) and the row sums need the range.

    In inference the key bias is left out: it adds `query . key_bias` to every score in a
    query's row, a constant that softmax removes, so the probabilities are the same (up to the
    rounding of the larger scores: in bfloat16 leaving it out rounds less).

    Example:
        >>> attention = BertSelfAttention(hidden_size=8, num_heads=2)
        >>> x = tf.random.normal([2, 5, 8])
        >>> attention(x, tf.ones([2, 5], tf.int32)).shape
        TensorShape([2, 5, 8])
    """

    def __init__(self, hidden_size, num_heads, dropout_rate=0.0, initializer_range=0.02,
                 **kwargs):
        super().__init__(**kwargs)
        if hidden_size % num_heads:
            raise ValueError(f"hidden_size {hidden_size} is not divisible by num_heads {num_heads}")
        self.hidden_size = hidden_size
        self.num_heads = num_heads
        self.head_size = hidden_size // num_heads
        self.dropout_rate = dropout_rate
        self.initializer_range = initializer_range
        self.query, self.key, self.value = (
            keras.layers.Dense(hidden_size, kernel_initializer=truncated_normal(initializer_range),
                               dtype=self.dtype_policy, name=name)
            for name in ("query", "key", "value"))
        self.dropout = BertDropout(dropout_rate, dtype=self.dtype_policy, name="dropout")

    def build(self, input_shape):
        for projection in (self.query, self.key, self.value):
            projection.build(input_shape)
        self.built = True

    def _project_to_heads(self, dense, inputs, training=None, use_bias=True):
        """`dense(inputs)` split into heads, `[batch, heads, seq, head_size]`, for
        `inputs [batch, seq, hidden]`.

        Whichever of the two layouts moves less memory: the projection itself is the same
        matmul either way, but one layout has to be reordered per call, and that copy is
        what differs. `_heads_projection` reorders the `[hidden, hidden]` kernel to
        `[heads, hidden, head_size]`; `_rows_projection` reorders the activations. With more
        rows (batch x seq) than `hidden`, the kernel is the smaller copy: on BERT-base at
        batch 32 the three head-major projections take as long as three bare 2-D matmuls
        (67.6 vs 69.3 ms per layer, float32, AMD EPYC, 2 vCPU), while 2-D matmuls plus
        activation transposes took 72.3. With fewer rows (batch 1, serving short texts), the
        kernel copies dominate: 17.7 of BERT-base's 176 ms op time at batch 1 x 128 were
        those transposes.

        In bfloat16 on a CPU with AMX the 2-D form always wins: its matmul runs on the AMX
        tiles with the bias fused (`matmul_plus_bias`), while the head-major batched matmuls
        are small and their bias is a separate add (BERT-base, batch 32: 7 % of the forward).

        Training runs the 2-D form too, whatever the shape: the head-major matmul is `batch x
        heads` matmuls of `seq` rows each, and fine-tuning's short sequences make them tiny.
        MiniLM's fine-tuning step at 32 x 16 tokens took 141 against 148 ms (bfloat16; float32
        228 both ways), bert_mini's pre-training step at 32 x 128 0.42 s either way, BERT-base's
        3.24-3.34 against 3.38-3.40 s (bfloat16; 2-vCPU Xeon with AMX, alternating processes).
        `use_bias=False` (inference only) leaves the bias out. The 2-D form moves the
        activations to heads with a gather where there are few rows (`head_layout`).

        One head always takes the 2-D form: with a kernel batch of 1 the broadcasting batched
        matmul corrupts the heap in TensorFlow 2.21's oneDNN kernel (`[8, 1, 16, 64] @ [1, 64,
        64]` and `[2, 1, 16, 8] @ [1, 8, 8]` abort or segfault; tensorflow/tensorflow#123109).
        """
        kernel, bias = dense_weights(dense)
        bias = bias if use_bias else None
        if training or amx_bfloat16_matmuls(self.compute_dtype) or self.num_heads == 1:
            return self._rows_projection(inputs, kernel, bias, training,
                                         by_gather=self._few_rows(inputs, training))
        if None not in inputs.shape[:2]:  # shapes known when tracing: decide now
            return (self._rows_projection(inputs, kernel, bias, by_gather=True)
                    if self._few_rows(inputs, training)
                    else self._heads_projection(inputs, kernel, bias))
        rows = tf.shape(inputs)[0] * tf.shape(inputs)[1]
        return tf.cond(rows < self.hidden_size,
                       lambda: self._rows_projection(inputs, kernel, bias, by_gather=True),
                       lambda: self._heads_projection(inputs, kernel, bias))

    def _few_rows(self, inputs, training):
        """Whether inference on `inputs [batch, seq, ...]` has fewer rows than hidden units, as
        known when traced (unknown: False): there the rows are projected with 2-D matmuls and
        heads move by gathers (`head_layout`)."""
        batch, seq = inputs.shape[0], inputs.shape[1]
        return (not training and batch is not None and seq is not None
                and batch * seq < self.hidden_size)

    def _rows_projection(self, inputs, kernel, bias, training=False, scale=1.0,
                         by_gather=False):
        """`(inputs @ kernel + bias) * scale` as one 2-D matmul (its bias fused by grappler),
        then the activations moved to `[batch, heads, seq, head_size]` (`split_heads`)."""
        projected = matmul_plus_bias(tf.reshape(inputs, [-1, self.hidden_size]), kernel, bias,
                                     training, scale)
        return split_heads(tf.reshape(projected, tf.shape(inputs)), self.num_heads, by_gather)

    def _heads_projection(self, inputs, kernel, bias):
        """`inputs [batch, seq, hidden] @ kernel + bias` as `[batch, heads, seq, head_size]`:
        the kernel viewed as `[heads, hidden, head_size]` and multiplied with the inputs in one
        broadcasting batched matmul, which writes the head-major layout directly. `bias` may
        be None. Not for one head (see `_project_to_heads`)."""
        by_head = tf.transpose(tf.reshape(kernel, [self.hidden_size, self.num_heads,
                                                   self.head_size]), [1, 0, 2])
        projected = tf.matmul(inputs[:, tf.newaxis], by_head)
        if bias is None:
            return projected
        return projected + tf.reshape(bias, [self.num_heads, 1, self.head_size])

    def call(self, hidden_states, input_mask, training=None, with_first_token=False,
             real_tokens=None):
        """The attended `[batch, seq, hidden]`; with `with_first_token`, also the first
        position's alone, `[batch, hidden]`, from its own one-row query (see `BertEncoder`:
        when only the pooled output is fetched, graph pruning drops the other queries).

        With `real_tokens` (the `RealTokens` of `input_mask`, in inference) the projections
        run on the real tokens' rows only, and the attended come back as those rows,
        `[tokens, hidden]`; only the scores see the padded `[batch, seq]` layout.
        """
        inputs = tf.cast(hidden_states, self.compute_dtype)
        key_bias = bool(training)  # see the class docstring
        scaled_query = self._query_carries_the_scale(training, real_tokens)
        if real_tokens is None:
            query = self._query_heads(inputs, training, scaled_query)
            key, value = (self._project_to_heads(dense, inputs, training, use_bias)
                          for dense, use_bias in ((self.key, key_bias), (self.value, True)))
        else:
            rows = real_tokens.gather(inputs)
            # Padding positions get zero queries, keys and values: the mask keeps their keys
            # out of every softmax, and their queries' rows are not gathered back.
            query, value = (real_tokens.scatter_heads(dense_rows(dense, rows), self.num_heads)
                            for dense in (self.query, self.value))
            key = real_tokens.scatter_heads(matmul_plus_bias(
                rows, tf.cast(self.key.kernel, self.compute_dtype)), self.num_heads)
        # A select, not Google's `(1 - mask) * -10000`: a Mul built before the scores' `* scale`
        # kept grappler from fusing the scale and the mask add into the scores matmul (BERT-base,
        # batch 32, bfloat16: a separate Mul and AddV2 of 4 ms per layer on an AMX Xeon).
        mask_bias = tf.cast(tf.where(input_mask[:, tf.newaxis, tf.newaxis, :] != 0, 0.0, -10000.0),
                            self.compute_dtype)
        padded = tf.reduce_any(input_mask == 0) if scaled_query else None
        by_head = self._attend(query, key, value, mask_bias, training, padded)
        few_rows = self._few_rows(inputs, training)
        context = (merge_heads(by_head, few_rows) if real_tokens is None
                   else real_tokens.gather_heads(by_head))
        if not with_first_token:
            return context
        first_query = self._query_heads(inputs[:, :1], training, scaled_query)
        first = self._attend(first_query, key, value, mask_bias, training, padded)
        return context, merge_heads(first, few_rows)[:, 0]

    def _query_carries_the_scale(self, training, real_tokens):
        """Whether the query's projection carries the scores' scale, `1 / sqrt(head_size)`, so
        that the scores' matmul adds the mask only to batches with padding (`_attend`) and runs
        bare otherwise: in bfloat16 inference on a CPU with AMX, whose projection form takes
        the scale in the multiply grappler fuses anyway (`matmul_plus_bias`). There oneDNN's
        batched matmul with the scale and mask as post-ops ran at half the rate of the bare one
        (`[32, 12, 128, 32]` scores 4.4 against 1.9 ms): in MiniLM's forward at 32 x 128 the
        scores took 30 instead of 53 ms of op time, and the pass 0.93-0.95x the wall time
        (median of 20 rounds, twice; 1.00x in a run of 10), BERT-base's within the spread, at
        batch 1 both unchanged (old and new in one process, in turns; 2-vCPU Xeon with AMX).
        Without AMX the post-ops cost little (BERT-base under the `AVX512_CORE_BF16` cap: 100 ms
        of scores per pass against 83 for the context's matmul of the same size), and on
        real-token rows (exports) the batch has padding."""
        return not training and real_tokens is None and amx_bfloat16_matmuls(self.compute_dtype)

    def _query_heads(self, inputs, training, scaled):
        """The query's projection of `inputs` to heads; `scaled`: times `1 / sqrt(head_size)`
        (`_query_carries_the_scale`, so the AMX form)."""
        if not scaled:
            return self._project_to_heads(self.query, inputs, training)
        return self._rows_projection(inputs, *dense_weights(self.query),
                                     scale=1.0 / math.sqrt(self.head_size),
                                     by_gather=self._few_rows(inputs, training))

    def _attend(self, query, key, value, mask_bias, training, padded=None):
        """Softmax attention of `query [batch, heads, queries, head_size]` over the keys, in the
        same layout. `padded` (a scalar bool tensor) is given when the query is already scaled
        (`_query_carries_the_scale`): whether the mask has any 0."""
        if padded is None:
            # `matmul * scale + mask_bias` is the pattern grappler fuses into one oneDNN
            # batched matmul with the scale and the mask add in its epilogue (no pass over the
            # scores, no scaled copy of the query kernel per call). Under mixed precision the
            # fused add is exact where the mask is 1 (it adds 0 to a score the matmul already
            # rounded to bfloat16).
            scale = 1.0 / math.sqrt(self.head_size)
            scores = tf.matmul(query, key, transpose_b=True) * scale + mask_bias
        else:
            # Without padding the mask adds 0 everywhere: the bare matmul (as transformers
            # passes no mask to its fused attention when every token is real). With padding
            # `* 1 + mask_bias`, fused as above (a bare `+ mask_bias` would not be).
            scores = tf.cond(
                padded,
                lambda: (tf.matmul(query, key, transpose_b=True)
                         * unfoldable_scalar(1.0, query.dtype) + mask_bias),
                lambda: tf.matmul(query, key, transpose_b=True))
        probabilities = tf.nn.softmax(tf.cast(scores, self._softmax_dtype(training)), axis=-1)
        probabilities = self.dropout(tf.cast(probabilities, self.compute_dtype), training=training)
        return tf.matmul(probabilities, value)

    def _softmax_dtype(self, training):
        """float32, except in inference with oneDNN, whose softmax takes the bfloat16 scores as
        they are and computes in float32 inside: its bfloat16 probabilities equal float32
        softmax's rounded to bfloat16 (all of them, measured on `[32, 12, 128, 128]`), without
        the two casts (BERT-base bfloat16, batch 32: 6 % of a forward pass on an AMX Xeon).
        TensorFlow's own bfloat16 softmax sums in bfloat16 (probabilities off by up to 8 %),
        and the softmax gradient would too, so training and other builds keep float32."""
        return self.compute_dtype if not training and onednn_enabled() else tf.float32

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(hidden_size=self.hidden_size, num_heads=self.num_heads,
                      dropout_rate=self.dropout_rate, initializer_range=self.initializer_range)
        return config
