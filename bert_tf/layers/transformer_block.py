"""`BertTransformerBlock`: one post-LayerNorm encoder layer of BERT."""

import keras
import tensorflow as tf

from bert_tf.layers.activations import get_activation, unfused_activation
from bert_tf.layers.dense_rows import dense_rows
from bert_tf.layers.dropout import BertDropout
from bert_tf.layers.fused_layer_norm import residual_layer_norm
from bert_tf.layers.inference_layer_norm import inference_layer_norm, known_rows
from bert_tf.layers.initializers import truncated_normal
from bert_tf.layers.onednn import amx_matmul_forms
from bert_tf.layers.portable_graphs import portable_graphs_enabled
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
        policy = self.dtype_policy
        self.attention = BertSelfAttention(hidden_size, num_heads, attention_dropout_rate,
                                           initializer_range, dtype=policy, name="attention")
        self.attention_output = keras.layers.Dense(
            hidden_size, kernel_initializer=truncated_normal(initializer_range), dtype=policy,
            name="attention_output")
        self.attention_layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_eps, dtype="float32", name="attention_layer_norm")
        self.intermediate = keras.layers.Dense(
            intermediate_size, kernel_initializer=truncated_normal(initializer_range),
            dtype=policy, name="intermediate")
        self.output_dense = keras.layers.Dense(
            hidden_size, kernel_initializer=truncated_normal(initializer_range), dtype=policy,
            name="output_dense")
        self.output_layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_eps, dtype="float32", name="output_layer_norm")
        self.dropout = BertDropout(hidden_dropout_rate, dtype=policy, name="dropout")
        self._activation_fn = get_activation(activation)
        self._unfused_activation_fn = unfused_activation(activation, self.compute_dtype)

    @property
    def input_dtype(self):
        """float32 whatever the policy: the hidden states are the residual stream. Keras casts a
        layer's floating inputs to this (by default the compute dtype), and under mixed
        precision that rounded the stream to bfloat16 at every layer and cast it back for the
        residual sum, forward and backward: two passes over the activations per layer (the cast
        back alone 8.4 of 239 ms of op time in MiniLM's bfloat16 forward at 32 x 128; without
        it the pass ran 1-4 % faster, 2-vCPU Xeon with AMX, docs/PERFORMANCE.md), and the error
        against float32 was up to 3x larger. The sub-layers still get their inputs in the
        compute dtype."""
        return "float32"

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
        batch, seq = hidden_states.shape[0], hidden_states.shape[1]
        rows = batch * seq if batch is not None and seq is not None else None
        activation_in_matmul = self._activation_in_matmul(training, real_tokens, rows)
        attended = self.attention(hidden_states, input_mask, training=training,
                                  with_first_token=with_first_token, real_tokens=real_tokens)
        attended, first_attended = attended if with_first_token else (attended, None)
        if real_tokens is None:
            output = tf.reshape(
                self._finish(attended, hidden_states, training, activation_in_matmul),
                tf.shape(hidden_states))
        else:
            output = real_tokens.scatter(self._finish(
                attended, real_tokens.gather(hidden_states), training, activation_in_matmul))
        if not with_first_token:
            return output
        return output, self._finish(first_attended, hidden_states[:, 0], training,
                                    activation_in_matmul)

    def _activation_in_matmul(self, training, real_tokens, rows):
        """Whether the feed-forward's activation runs in its matmul's epilogue (grappler fuses
        MatMul + BiasAdd + GELU into oneDNN's inner product), rather than as its own op after
        the matmul (`unfused_activation`; for the exact GELU one XLA loop).

        Not in training: the gradient needs the activation's input. Not in bfloat16 inference
        on a CPU with AMX either: TensorFlow hands that inner product its weights in a plain
        layout and oneDNN runs it without AMX, while the AMX matmul form (`matmul_plus_bias`)
        cannot take a GELU. Measured on a 2-vCPU Xeon with AMX: `[4096, 768] @ [768, 3072]`
        with its GELU 52 -> 39 ms (the GELU's loop alone 7 ms; both forms in one process),
        BERT-base's forward at 32 x 128 fetching every output 36.4-36.8 -> 41.2-44.5 seq/s
        (`bench/encoder_throughput.py`, alternating processes; 1.33-1.42x on a slower day,
        MiniLM too). Nor on any CPU at few `rows` known when traced (`few_bfloat16_rows`,
        batch 1: the AMX matmul form is faster there without AMX as well). Except in exports
        (`portable_graphs`: no XLA in a SavedModel) and on real-token rows, whose count changes
        from batch to batch while XLA compiles its loop once per shape.
        """
        if training:
            return False
        return not (amx_matmul_forms(self.compute_dtype, rows, training)
                    and real_tokens is None and not portable_graphs_enabled())

    def _finish(self, attended, hidden_states, training, activation_in_matmul):
        """Output projection, residual, LayerNorm and feed-forward on the attention output of
        `hidden_states` (any shape `[..., hidden]`), as rows `[positions, hidden]` (the 2-D
        layout whose matmuls fuse their bias and GELU, see `dense_rows`). The rows' count as
        far as known when traced (an unknown batch counted as 1) picks the LayerNorm's form:
        `[None, 128, 768]` reshaped to rows is `[None, 768]`, which alone would take Keras'
        ops (BERT-base at 32 x 128 with an unknown batch: 24 LayerNorms unfused, the float32
        forward 3 % slower)."""
        min_rows = known_rows(hidden_states.shape)
        residual = tf.reshape(tf.cast(hidden_states, tf.float32), [-1, self.hidden_size])
        attended = dense_rows(self.attention_output, tf.reshape(attended, [-1, self.hidden_size]),
                              training=training)
        hidden = self._drop_add_and_norm(self.attention_layer_norm, residual, attended, training,
                                         min_rows)
        activation = self._activation_fn if activation_in_matmul else self._unfused_activation_fn
        inner = dense_rows(self.intermediate, tf.cast(hidden, self.compute_dtype), activation,
                           training, fuse_activation=activation_in_matmul)
        output = dense_rows(self.output_dense, inner, training=training)
        return self._drop_add_and_norm(self.output_layer_norm, hidden, output, training,
                                       min_rows)

    def _drop_add_and_norm(self, layer_norm, residual, branch, training, min_rows):
        """`layer_norm(residual + dropout(branch))` in float32: in inference (no dropout)
        oneDNN's single LayerNorm kernel (`inference_layer_norm`); in bfloat16 training one XLA
        loop each way with the dropout inside (`residual_layer_norm`); TensorFlow's ops
        otherwise (so exports hold no XLA function).

        Also for fine-tuning's padded batches, whose length changes from step to step: XLA
        compiles the loops once per shape, and the first step at a new length took ~0.2 s
        more (430-490 against 220-280 ms), but every step after ran 10-11 % faster (MiniLM,
        bfloat16, median step 32 x 16 tokens 113.3 -> 102.5 ms, 32 x 32 194.0 -> 173.6 ms,
        both versions in one process taking turns; 2-vCPU Xeon with AMX): TensorFlow's ops were
        the dropout's random draws, bit masks and select, the add and LayerNorm's ~10 ops
        forward and ~20 backward, each a pass over the rows. SST-2 pads to ~17 lengths in an
        epoch of 2,105 steps."""
        if training and self.compute_dtype == "bfloat16":
            seed = self.dropout.next_seed() if self.dropout.rate else None
            return residual_layer_norm(residual, branch, layer_norm, self.dropout.rate, seed)
        summed = residual + tf.cast(self.dropout(branch, training=training), tf.float32)
        return (layer_norm(summed) if training
                else inference_layer_norm(summed, layer_norm, min_rows))

    def compute_output_spec(self, hidden_states, input_mask, training=None,
                            with_first_token=False):
        # float32: the output is a LayerNorm's (see `input_dtype`).
        output = keras.KerasTensor(hidden_states.shape, dtype="float32")
        if not with_first_token:
            return output
        first = keras.KerasTensor((hidden_states.shape[0], self.hidden_size), dtype="float32")
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
