"""`MaskedLMHead`: BERT's masked-language-model output layer, scored at the masked positions."""

import keras
import tensorflow as tf

from bert_tf.layers.activations import get_activation
from bert_tf.layers.initializers import truncated_normal


@keras.saving.register_keras_serializable(package="bert_tf")
class MaskedLMHead(keras.layers.Layer):
    """Predicts the original token at each masked position, as Google's `run_pretraining.py`.

    Only the `masked_lm_positions` of each sequence are gathered and scored (at most
    `max_predictions_per_seq`, ~15% of the tokens): the `[hidden, vocab]` decoder is the
    largest matmul of pre-training, and running it over every position would waste ~85% of it.

    The gathered vectors go through a `transform` (dense + activation + LayerNorm, Google's
    `cls/predictions/transform`), then the decoder, which is the *word embedding table* of the
    encoder (tied, as in the paper: `logits = h @ E^T + output_bias`). The table is an argument
    of `call`, not a weight of this layer, so it stays the encoder's variable and its gradient
    sums both uses.

    Computes in float32 under every dtype policy (like the package's task heads): its logits
    feed a softmax over the whole vocabulary. The one exception is the decoder's matmul, the
    largest of the head, whose inputs are cast to `decoder_dtype` (`BertPretrainer` passes the
    encoder's compute dtype, bfloat16 under `mixed_bfloat16`, as keras-hub's head and PyTorch's
    autocast do); its product is cast back to float32 before the bias and the softmax. Why
    (`bench/pretraining_profile.py`, bert_mini under `mixed_bfloat16`, vocabulary 30522, 2-vCPU
    AMD EPYC with avx512_bf16): in float32 this matmul and its two gradients took ~440 of the
    1088 ms of op time of a 128 x 32-token step; in bfloat16 they take ~130 of 773 ms at 32 x
    128 tokens, where the step went from 0.600 to 0.517 s.

    Example:
        >>> head = MaskedLMHead(vocab_size=100, hidden_size=8)
        >>> sequence_output = tf.random.normal([2, 5, 8])
        >>> positions = tf.constant([[1, 3], [0, 0]])    # padded with position 0
        >>> head(sequence_output, positions, tf.random.normal([100, 8])).shape
        TensorShape([2, 2, 100])
    """

    def __init__(self, vocab_size, hidden_size, activation="gelu", initializer_range=0.02,
                 layer_norm_eps=1e-12, decoder_dtype="float32", **kwargs):
        kwargs["dtype"] = "float32"  # fixed, see above; get_config round-trips it
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.activation = activation
        self.initializer_range = initializer_range
        self.layer_norm_eps = layer_norm_eps
        self.decoder_dtype = decoder_dtype
        self._activation_fn = get_activation(activation)
        self.transform = keras.layers.Dense(
            hidden_size, kernel_initializer=truncated_normal(initializer_range), dtype="float32",
            name="transform")
        self.transform_layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_eps, dtype="float32", name="transform_layer_norm")

    def build(self, sequence_output_shape=None, masked_lm_positions_shape=None,
              embedding_table_shape=None):
        self.transform.build((None, self.hidden_size))
        self.transform_layer_norm.build((None, self.hidden_size))
        self.output_bias = self.add_weight(name="output_bias", shape=(self.vocab_size,),
                                           initializer="zeros")
        self.built = True

    def call(self, sequence_output, masked_lm_positions, embedding_table):
        # [batch, seq, hidden] at [batch, predictions] -> [batch * predictions, hidden]: the
        # predictions as rows of one 2-D matrix. A [batch, predictions, hidden] x [hidden, vocab]
        # product would be a broadcasting BatchMatMul, whose gradient for the table materialises
        # one [vocab, hidden] product per sequence and then sums them (bench/
        # pretraining_profile.py, bert_mini, batch 32: the head's products took ~360 ms of op
        # time per step as BatchMatMuls, ~170 ms as 2-D MatMuls).
        positions = tf.cast(masked_lm_positions, tf.int32)
        gathered = tf.reshape(tf.gather(tf.cast(sequence_output, tf.float32), positions,
                                        batch_dims=1), [-1, self.hidden_size])
        hidden = self.transform_layer_norm(self._activation_fn(self.transform(gathered)))
        logits = tf.matmul(tf.cast(hidden, self.decoder_dtype),
                           tf.cast(embedding_table, self.decoder_dtype), transpose_b=True)
        logits = tf.nn.bias_add(tf.cast(logits, tf.float32), self.output_bias)
        return tf.reshape(logits, tf.concat([tf.shape(positions), [self.vocab_size]], axis=0))

    def compute_output_shape(self, sequence_output_shape, masked_lm_positions_shape,
                             embedding_table_shape=None):
        return (*tuple(masked_lm_positions_shape), self.vocab_size)

    def get_config(self):
        config = super().get_config()
        config.update(vocab_size=self.vocab_size, hidden_size=self.hidden_size,
                      activation=self.activation, initializer_range=self.initializer_range,
                      layer_norm_eps=self.layer_norm_eps, decoder_dtype=self.decoder_dtype)
        return config
