"""`BertEmbeddings`: word + position + token-type embeddings, LayerNorm and dropout."""

import keras
import tensorflow as tf

from bert_tf.layers.dropout import BertDropout
from bert_tf.layers.inference_layer_norm import inference_layer_norm
from bert_tf.layers.initializers import truncated_normal


@keras.saving.register_keras_serializable(package="bert_tf")
class BertEmbeddings(keras.layers.Layer):
    """Sums the three embeddings of BERT's input and normalises them.

    Positions are absolute and learned: sequence position `i` uses row `i` of the position table,
    so inputs longer than `max_position_embeddings` have no embedding and are rejected.

    Example:
        >>> layer = BertEmbeddings(vocab_size=100, hidden_size=8, max_position_embeddings=16)
        >>> layer(tf.ones([2, 5], tf.int32), tf.zeros([2, 5], tf.int32)).shape
        TensorShape([2, 5, 8])
    """

    def __init__(self, vocab_size, hidden_size, max_position_embeddings, type_vocab_size=2,
                 initializer_range=0.02, layer_norm_eps=1e-12, dropout_rate=0.0, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.max_position_embeddings = max_position_embeddings
        self.type_vocab_size = type_vocab_size
        self.initializer_range = initializer_range
        self.layer_norm_eps = layer_norm_eps
        self.dropout_rate = dropout_rate
        # LayerNorm and the output stay float32 under mixed precision: the output starts the
        # residual stream (see BertTransformerBlock.input_dtype).
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_eps, dtype="float32", name="layer_norm")
        self.dropout = BertDropout(dropout_rate, dtype="float32", name="dropout")

    def build(self, input_shape=None):
        # autocast=False: under mixed precision Keras would otherwise cast each whole table to
        # the compute dtype on every read (23M values for BERT-base's word table) just to
        # gather a few rows; `call` gathers in float32 and casts only the result.
        self.word_embeddings, self.position_embeddings, self.token_type_embeddings = (
            self.add_weight(name=name, shape=(rows, self.hidden_size), autocast=False,
                            initializer=truncated_normal(self.initializer_range))
            for name, rows in (("word_embeddings", self.vocab_size),
                               ("position_embeddings", self.max_position_embeddings),
                               ("token_type_embeddings", self.type_vocab_size)))
        self.layer_norm.build((None, None, self.hidden_size))
        self.built = True

    def call(self, input_word_ids, input_type_ids, training=None):
        seq_length = input_word_ids.shape[1]
        if seq_length is not None and seq_length > self.max_position_embeddings:
            raise ValueError(
                f"Sequence length {seq_length} exceeds max_position_embeddings "
                f"{self.max_position_embeddings}: truncate inputs to at most "
                f"{self.max_position_embeddings} tokens.")
        dynamic_length = tf.shape(input_word_ids)[1]
        checks = [] if seq_length is not None else [tf.debugging.assert_less_equal(
            dynamic_length, self.max_position_embeddings,
            message="Sequence length exceeds max_position_embeddings")]
        # The gathers wait for the check: run beside it, they allocated [batch, seq, hidden]
        # twice for any seq before it failed (a served MiniLM encoder: 1.5 GB for a 2 MB
        # request of 500,000 ids).
        with tf.control_dependencies(checks):
            positions = self.position_embeddings[:dynamic_length]
            # Embedding tables are float32 variables; gathering first and casting the small
            # result to the compute dtype is cheaper than casting the tables. The rows are read
            # from the TensorFlow variable itself (`ResourceGather`), not from a tensor of the
            # whole table: once an optimizer has written a table's rows (`FusedAdamW` scatters a
            # sparse gradient's rows), TensorFlow copies the whole variable on every dense read.
            # MiniLM's word embeddings (47 MB): 5.2 ms per read that way, 0.5 ms for the rows
            # alone.
            embeddings = (tf.gather(self.word_embeddings.value, input_word_ids)
                          + tf.gather(self.token_type_embeddings.value, input_type_ids)
                          + positions[tf.newaxis])
        embeddings = (self.layer_norm(embeddings) if training
                      else inference_layer_norm(embeddings, self.layer_norm))
        return self.dropout(embeddings, training=training)

    def get_config(self):
        config = super().get_config()
        config.update(vocab_size=self.vocab_size, hidden_size=self.hidden_size,
                      max_position_embeddings=self.max_position_embeddings,
                      type_vocab_size=self.type_vocab_size,
                      initializer_range=self.initializer_range,
                      layer_norm_eps=self.layer_norm_eps, dropout_rate=self.dropout_rate)
        return config
