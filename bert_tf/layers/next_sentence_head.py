"""`NextSentenceHead`: BERT's next-sentence-prediction classifier on the pooled output."""

import keras
import tensorflow as tf

from bert_tf.layers.initializers import truncated_normal


@keras.saving.register_keras_serializable(package="bert_tf")
class NextSentenceHead(keras.layers.Layer):
    """Two logits per example from the pooled `[CLS]` vector: index 0 "B follows A", index 1
    "B is a random sentence" (the `next_sentence_labels` convention of Google's
    `create_pretraining_data.py`).

    The weight keeps Google's layout, `output_weights [2, hidden]` (`cls/seq_relationship/
    output_weights`, applied as `pooled @ W^T + output_bias`), so Google checkpoints load
    without a transpose. Computes in float32 under every dtype policy.

    Example:
        >>> head = NextSentenceHead(hidden_size=8)
        >>> head(tf.random.normal([3, 8])).shape
        TensorShape([3, 2])
    """

    def __init__(self, hidden_size, initializer_range=0.02, **kwargs):
        kwargs["dtype"] = "float32"  # fixed, see above; get_config round-trips it
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.initializer_range = initializer_range

    def build(self, pooled_output_shape=None):
        self.output_weights = self.add_weight(
            name="output_weights", shape=(2, self.hidden_size),
            initializer=truncated_normal(self.initializer_range))
        self.output_bias = self.add_weight(name="output_bias", shape=(2,), initializer="zeros")
        self.built = True

    def call(self, pooled_output):
        logits = tf.matmul(tf.cast(pooled_output, tf.float32), self.output_weights,
                           transpose_b=True)
        return logits + self.output_bias

    def compute_output_shape(self, pooled_output_shape):
        return (pooled_output_shape[0], 2)

    def get_config(self):
        config = super().get_config()
        config.update(hidden_size=self.hidden_size, initializer_range=self.initializer_range)
        return config
