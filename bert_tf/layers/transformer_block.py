"""`BertTransformerBlock`: one post-LayerNorm encoder layer of BERT."""

import keras
import tensorflow as tf

from bert_tf.layers.activations import get_activation, training_activation
from bert_tf.layers.dense_rows import dense_rows
from bert_tf.layers.dropout import BertDropout
from bert_tf.layers.fused_layer_norm import residual_layer_norm
from bert_tf.layers.inference_layer_norm import inference_layer_norm
from bert_tf.layers.real_tokens import RealTokens, real_tokens_only_enabled
from bert_tf.layers.self_attention import BertSelfAttention


@keras.saving.register_keras_serializable(package="bert_tf")
class BertTransformerBlock(keras.layers.Layer):
    """Self-attention and a feed-forward network, each followed by dropout, a residual
    connection and LayerNorm (BERT normalises *after* the residual: "post-LN").

    Under mixed precision the residual stream stays float32: LayerNorm outputs float32, the
    matmuls run in the compute dtype, and each branch is cast back before the residual sum.
    Sub-layer names follow Google's checkpoint (`attention/output/dense`, `intermediate/dense`...).

    Example:
        >>> block = BertTransformerBlock(hidden_size=8, num_heads=2, intermediate_size=32)
        >>> block(tf.random.normal([2, 5, 8]), tf.ones([2, 5], tf.int32)).shape
        TensorShape([2, 5, 8])
    """

    def __init__(self, hidden_size, num_heads, intermediate_size, activation="gelu",
                 hidden_dropout_rate=0.0, attention_dropout_rate=0.0, initializer_range=0.02,
                 layer_norm_eps=1e-12, **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.num_heads = num_heads
        self.intermediate_size = intermediate_size
        self.activation = activation
        self.hidden_dropout_rate = hidden_dropout_rate
        self.attention_dropout_rate = attention_dropout_rate
        self.initializer_range = initializer_range
        self.layer_norm_eps = layer_norm_eps
        initializer = keras.initializers.TruncatedNormal(stddev=initializer_range)
        policy = self.dtype_policy
        self.attention = BertSelfAttention(hidden_size, num_heads, attention_dropout_rate,
                                           initializer_range, dtype=policy, name="attention")
        self.attention_output = keras.layers.Dense(
            hidden_size, kernel_initializer=initializer, dtype=policy, name="attention_output")
        self.attention_layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_eps, dtype="float32", name="attention_layer_norm")
        self.intermediate = keras.layers.Dense(
            intermediate_size, kernel_initializer=initializer, dtype=policy, name="intermediate")
        self.output_dense = keras.layers.Dense(
            hidden_size, kernel_initializer=initializer, dtype=policy, name="output_dense")
        self.output_layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_eps, dtype="float32", name="output_layer_norm")
        self.dropout = BertDropout(hidden_dropout_rate, dtype=policy, name="dropout")
        self._activation_fn = get_activation(activation)
        self._training_activation_fn = training_activation(activation, self.compute_dtype)

    def build(self, input_shape):
        hidden_shape = (None, None, self.hidden_size)
        self.attention.build(hidden_shape)
        self.attention_output.build(hidden_shape)
        self.attention_layer_norm.build(hidden_shape)
        self.intermediate.build(hidden_shape)
        self.output_dense.build((None, None, self.intermediate_size))
        self.output_layer_norm.build(hidden_shape)
        self.built = True

    def call(self, hidden_states, input_mask, training=None, with_first_token=False):
        """The layer's output `[batch, seq, hidden]`; with `with_first_token`, also the first
        position's output alone, `[batch, hidden]`, computed from a one-row query so that a
        caller fetching only that (the pooler, a sentence classifier) lets graph pruning drop
        the other positions' query, attention and feed-forward, forward and backward.
        In training the row draws its own dropout masks (the same distribution as the full
        output's first row); a step that fetches both outputs (pre-training's NSP and masked
        LM) computes that row twice, 1/seq of a layer more.

        In inference under `real_tokens_only()` every dense layer and LayerNorm runs on the
        real tokens' rows alone, and the output is 0 at padding positions (see
        `bert_tf.layers.real_tokens`)."""
        real_tokens = (RealTokens(input_mask) if not training and real_tokens_only_enabled()
                       else None)
        attended = self.attention(hidden_states, input_mask, training=training,
                                  with_first_token=with_first_token, real_tokens=real_tokens)
        attended, first_attended = attended if with_first_token else (attended, None)
        if real_tokens is None:
            output = tf.reshape(self._finish(attended, hidden_states, training),
                                tf.shape(hidden_states))
        else:
            output = real_tokens.scatter(
                self._finish(attended, real_tokens.gather(hidden_states), training))
        if not with_first_token:
            return output
        return output, self._finish(first_attended, hidden_states[:, 0], training)

    def _finish(self, attended, hidden_states, training):
        """Output projection, residual, LayerNorm and feed-forward on the attention output of
        `hidden_states` (any shape `[..., hidden]`), as rows `[positions, hidden]` (the 2-D
        layout whose matmuls fuse their bias and GELU, see `dense_rows`)."""
        residual = tf.reshape(tf.cast(hidden_states, tf.float32), [-1, self.hidden_size])
        attended = dense_rows(self.attention_output, tf.reshape(attended, [-1, self.hidden_size]),
                              training=training)
        attended = self.dropout(attended, training=training)
        hidden = self._add_and_norm(self.attention_layer_norm, residual, attended, training)
        activation = self._training_activation_fn if training else self._activation_fn
        inner = dense_rows(self.intermediate, tf.cast(hidden, self.compute_dtype), activation,
                           training)
        output = self.dropout(dense_rows(self.output_dense, inner, training=training),
                              training=training)
        return self._add_and_norm(self.output_layer_norm, hidden, output, training)

    def _add_and_norm(self, layer_norm, residual, branch, training):
        """`layer_norm(residual + branch)` in float32: in inference oneDNN's single LayerNorm
        kernel (`inference_layer_norm`); in training one XLA loop each way
        (`residual_layer_norm`) in bfloat16 on a shape fixed when traced, TensorFlow's ops
        otherwise (so exports hold no XLA function).

        Why only fixed shapes: XLA compiles once per shape, ~0.3 s for this pair of loops,
        which pre-training (one shape) pays once, for +3-7 % steps (bert_mini). Fine-tuning
        pads each batch to its own length (up to 32 shapes per run; Keras traces the step with
        an unknown length from the second on); there the compilations outweighed the ~0.3 ms a
        call saves (`bench/finetune_time_to_accuracy.py --max_train_examples=4000`: 0.22 s per
        step against 0.19-0.21 without)."""
        if (training and self.compute_dtype == "bfloat16"
                and residual.shape.is_fully_defined()):
            return residual_layer_norm(residual, branch, layer_norm)
        summed = residual + tf.cast(branch, tf.float32)
        return layer_norm(summed) if training else inference_layer_norm(summed, layer_norm)

    def compute_output_spec(self, hidden_states, input_mask, training=None,
                            with_first_token=False):
        output = keras.KerasTensor(hidden_states.shape, dtype=self.compute_dtype)
        if not with_first_token:
            return output
        first = keras.KerasTensor((hidden_states.shape[0], self.hidden_size),
                                  dtype=self.compute_dtype)
        return output, first

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(hidden_size=self.hidden_size, num_heads=self.num_heads,
                      intermediate_size=self.intermediate_size, activation=self.activation,
                      hidden_dropout_rate=self.hidden_dropout_rate,
                      attention_dropout_rate=self.attention_dropout_rate,
                      initializer_range=self.initializer_range,
                      layer_norm_eps=self.layer_norm_eps)
        return config
