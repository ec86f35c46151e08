"""`BertSelfAttention`: multi-head scaled dot-product self-attention with a padding mask."""

import math

import keras
import tensorflow as tf


@keras.saving.register_keras_serializable(package="bert_tf")
class BertSelfAttention(keras.layers.Layer):
    """Self-attention over `[batch, seq, hidden]` with separate query/key/value projections.

    The projections keep Google's `[hidden, hidden]` kernels (`attention/self/{query,key,value}`),
    so checkpoints map one to one. Scores and softmax are float32 under mixed precision: the
    additive mask (-10000 on padding, as in Google's BERT) and the row sums need the range.

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
        dense = dict(units=hidden_size, dtype=self.dtype_policy,
                     kernel_initializer=keras.initializers.TruncatedNormal(stddev=initializer_range))
        self.query = keras.layers.Dense(name="query", **dense)
        self.key = keras.layers.Dense(name="key", **dense)
        self.value = keras.layers.Dense(name="value", **dense)
        self.dropout = keras.layers.Dropout(dropout_rate, dtype=self.dtype_policy, name="dropout")

    def build(self, input_shape):
        for projection in (self.query, self.key, self.value):
            projection.build(input_shape)
        self.built = True

    def _split_heads(self, x, batch, seq):
        # [batch, seq, hidden] -> [batch, heads, seq, head_size]
        x = tf.reshape(x, [batch, seq, self.num_heads, self.head_size])
        return tf.transpose(x, [0, 2, 1, 3])

    def call(self, hidden_states, input_mask, training=None):
        batch, seq = tf.shape(hidden_states)[0], tf.shape(hidden_states)[1]
        query = self._split_heads(self.query(hidden_states), batch, seq)
        key = self._split_heads(self.key(hidden_states), batch, seq)
        value = self._split_heads(self.value(hidden_states), batch, seq)
        # Scaling the query (seq x head_size values) is cheaper than scaling the scores (seq x seq).
        query = query * tf.cast(1.0 / math.sqrt(self.head_size), query.dtype)
        scores = tf.cast(tf.matmul(query, key, transpose_b=True), tf.float32)
        padding = 1.0 - tf.cast(input_mask[:, tf.newaxis, tf.newaxis, :], tf.float32)
        probabilities = tf.nn.softmax(scores + padding * -10000.0, axis=-1)
        probabilities = self.dropout(tf.cast(probabilities, self.compute_dtype), training=training)
        context = tf.matmul(probabilities, value)
        context = tf.transpose(context, [0, 2, 1, 3])
        return tf.reshape(context, [batch, seq, self.hidden_size])

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(hidden_size=self.hidden_size, num_heads=self.num_heads,
                      dropout_rate=self.dropout_rate, initializer_range=self.initializer_range)
        return config
