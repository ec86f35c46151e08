"""`BertEncoder`: the BERT network, dict in and dict out."""

import weakref

import keras
import tensorflow as tf

from bert_tf.config import BertConfig
from bert_tf.layers.embeddings import BertEmbeddings
from bert_tf.layers.initializers import truncated_normal
from bert_tf.layers.transformer_block import BertTransformerBlock
from bert_tf.models.saved_model_export import (SavedModelExport, flat_outputs, input_specs,
                                               with_default_output)

INPUT_KEYS = ("input_word_ids", "input_mask", "input_type_ids")

# Each encoder's inference graph for eager calls (see `BertEncoder.call`). Kept here, not as an
# attribute: SavedModel export saves every `tf.function` it finds among a model's attributes.
_GRAPH_INFERENCE = weakref.WeakKeyDictionary()


@keras.saving.register_keras_serializable(package="bert_tf")
class BertEncoder(SavedModelExport, keras.Model):
    """BERT's encoder as a Keras 3 functional model.

    Inputs: a dict of int32 `[batch, seq]` tensors `input_word_ids`, `input_mask` (1 for real
    tokens, 0 for padding) and `input_type_ids` (segment ids). Any `seq` up to
    `config.max_position_embeddings` works.

    Outputs: a dict with `sequence_output [batch, seq, hidden]` (the last layer),
    `pooled_output [batch, hidden]` (tanh dense on the `[CLS]` position, what next-sentence
    prediction and sentence classification read) and `encoder_outputs`, the list of every
    layer's `[batch, seq, hidden]` output (the paper's feature-based approach concatenates the
    last four). Outputs are float32 under every dtype policy.

    `export(path)` writes a SavedModel whose `serve(inputs)` returns them with
    `encoder_outputs` numbered `encoder_outputs_0` ... (`bert_tf.export.export_encoder` writes
    TF Hub's encoder format: vocabulary, `training=True` for fine-tuning, MLM head).
    `keras.models.clone_model(encoder)` gives a plain functional `keras.Model` (Keras clones
    every functional subclass so); `BertEncoder.from_config(encoder.get_config())` a
    `BertEncoder`.

    Example:
        >>> encoder = BertEncoder(BertConfig.from_name("bert_tiny"))
        >>> ids = tf.constant([[101, 7592, 102, 0]])
        >>> out = encoder({"input_word_ids": ids, "input_mask": tf.sign(ids),
        ...                "input_type_ids": tf.zeros_like(ids)})
        >>> out["pooled_output"].shape
        TensorShape([1, 128])
    """

    def __init__(self, config, dtype=None, **kwargs):
        if isinstance(config, dict):
            config = BertConfig.from_dict(config)
        if not isinstance(config, BertConfig):
            raise TypeError(f"BertEncoder takes a BertConfig or its dict, got "
                            f"{type(config).__name__} {config!r:.80}: load one with "
                            f"BertConfig.from_json_file(path) or BertConfig.from_name(name).")
        policy = keras.dtype_policies.get(dtype) if dtype else keras.config.dtype_policy()
        if not tf.as_dtype(policy.compute_dtype).is_floating:
            raise ValueError(f"BertEncoder computes in floating point: dtype must be a float "
                             f"policy such as 'float32' or 'mixed_bfloat16', got {dtype!r}.")

        embeddings = BertEmbeddings(
            vocab_size=config.vocab_size, hidden_size=config.hidden_size,
            max_position_embeddings=config.max_position_embeddings,
            type_vocab_size=config.type_vocab_size, initializer_range=config.initializer_range,
            layer_norm_eps=config.layer_norm_eps, dropout_rate=config.hidden_dropout_prob,
            dtype=policy, name="embeddings")
        blocks = [
            BertTransformerBlock(
                hidden_size=config.hidden_size, num_heads=config.num_attention_heads,
                intermediate_size=config.intermediate_size, activation=config.hidden_act,
                hidden_dropout_rate=config.hidden_dropout_prob,
                attention_dropout_rate=config.attention_probs_dropout_prob,
                initializer_range=config.initializer_range, layer_norm_eps=config.layer_norm_eps,
                dtype=policy, name=f"layer_{i}")
            for i in range(config.num_hidden_layers)]
        pooler = keras.layers.Dense(config.hidden_size, activation="tanh",
                                    kernel_initializer=truncated_normal(config.initializer_range),
                                    dtype=policy, name="pooler")

        inputs = {key: keras.Input(shape=(None,), dtype="int32", name=key) for key in INPUT_KEYS}
        hidden = embeddings(inputs["input_word_ids"], inputs["input_type_ids"])
        encoder_outputs = []
        for block in blocks[:-1]:
            hidden = block(hidden, inputs["input_mask"])
            encoder_outputs.append(hidden)
        # The last layer also gives the [CLS] position's output on its own: a model that
        # fetches only `pooled_output` (sentence classification) then skips that layer's
        # other queries, attention rows and feed-forward (graph pruning; ~7 % of BERT-base's
        # forward FLOPs, ~14 % of a 6-layer model's), in training their gradients too.
        hidden, first_token = blocks[-1](hidden, inputs["input_mask"], with_first_token=True)
        encoder_outputs.append(hidden)
        pooled = keras.ops.cast(pooler(first_token), "float32")
        outputs = {"sequence_output": hidden, "pooled_output": pooled,
                   "encoder_outputs": encoder_outputs}
        trainable = kwargs.pop("trainable", True)
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)
        # Set once Keras tracks the layers: given to its constructor, the flag did not reach
        # them, and a frozen encoder came back from `.keras` with trainable variables.
        self.trainable = trainable

        self.config = config
        self.embeddings = embeddings
        self.transformer_blocks = blocks
        self.pooler = pooler

    def call(self, inputs, training=None, mask=None):
        """The outputs dict. Called eagerly for inference (a notebook's `encoder(inputs)`), it
        runs as one `tf.function` instead of op by op: eagerly, none of grappler's fusions
        happen (matmul + bias + GELU, the scores' scale and mask, LayerNorm), and BERT-base at
        batch 32 x 128 took 3.08 s in float32 and 1.87 s in `mixed_bfloat16` against 2.23 and
        0.80 s as a graph (2-vCPU Xeon with AMX). Training, graphs (`fit`, `predict`, exports)
        and `run_eagerly=True` take the functional graph as it is."""
        _check_input_shapes(inputs)
        inputs = _with_shape_check_at_run_time(inputs)
        if not self._eager_inference(inputs, training):
            return super().call(inputs, training=training, mask=mask)
        function = _GRAPH_INFERENCE.get(self)
        if function is None:
            encoder = weakref.ref(self)
            function = tf.function(
                lambda inputs: super(BertEncoder, encoder()).call(inputs, training=False),
                reduce_retracing=True)
            _GRAPH_INFERENCE[self] = function
        return function(inputs)

    def _eager_inference(self, inputs, training):
        if training or not tf.executing_eagerly() or self.run_eagerly:
            return False
        # Too long an input goes op by op, where the embeddings raise their ValueError naming
        # the lengths (the graph, traced for any length, can only fail when it runs).
        ids = inputs.get("input_word_ids") if isinstance(inputs, dict) else None
        return ids is None or keras.ops.shape(ids)[-1] <= self.config.max_position_embeddings

    def export_input_signature(self):
        return [input_specs(INPUT_KEYS)]

    def export_outputs(self, outputs):
        """The exported encoder adds `default` (= `pooled_output`), as TF Hub's do."""
        return flat_outputs(with_default_output(outputs))

    def get_config(self):
        # The layers' policy: the model's own stays the global one when `dtype=` is given.
        config = {"name": self.name, "trainable": self.trainable,
                  "config": self.config.to_dict(),
                  "dtype": keras.dtype_policies.serialize(self.embeddings.dtype_policy)}
        # Layers frozen on their own (the embeddings, the lowest blocks), which `.keras` files
        # otherwise bring back trainable.
        frozen = [layer.name for layer in (self.embeddings, *self.transformer_blocks, self.pooler)
                  if not layer.trainable]
        if self.trainable and frozen:
            config["frozen_layers"] = frozen
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        frozen = config.pop("frozen_layers", [])
        encoder = cls(**config)
        for name in frozen:
            encoder.get_layer(name).trainable = False
        return encoder


def _with_shape_check_at_run_time(inputs):
    """`inputs`, in a graph whose input shapes are not all known when traced (exports, a
    `tf.function` with an `input_signature`), made to depend on a check that the mask and the
    type ids have the ids' shape: broadcasting let a `[1, 2]` mask with `[1, 5]` ids through
    as if every position were real (the served encoder answered 200 with that result). Two
    shape comparisons per call; eagerly the shapes are known and `_check_input_shapes` has
    done it."""
    if (tf.executing_eagerly() or not isinstance(inputs, dict)
            or "input_word_ids" not in inputs):
        return inputs
    ids = inputs["input_word_ids"]
    others = [key for key in ("input_mask", "input_type_ids") if key in inputs]
    if not others or all(inputs[key].shape.is_fully_defined() for key in ["input_word_ids",
                                                                          *others]):
        return inputs
    checks = [tf.debugging.assert_equal(
        tf.shape(inputs[key]), tf.shape(ids),
        message=f"BertEncoder inputs must all have the same shape: {key} against "
                f"input_word_ids") for key in others]
    with tf.control_dependencies(checks):
        return {key: tf.identity(value) if key in others or key == "input_word_ids" else value
                for key, value in inputs.items()}


def _check_input_shapes(inputs):
    """Raises a ValueError naming the inputs when they cannot be one batch of sequences: the
    graph would fail deep inside (ragged tensors, no positions) or, for a mask or type ids of
    another shape than the ids, give a result without the mask. Static shapes only: no op is
    added to the graph."""
    if not isinstance(inputs, dict):
        return
    ragged = [key for key in INPUT_KEYS if isinstance(inputs.get(key), tf.RaggedTensor)]
    if ragged:
        raise ValueError(f"BertEncoder inputs {ragged} are ragged: pad every input to a dense "
                         f"int32 [batch, seq] tensor (e.g. `.to_tensor()`).")
    shapes = {key: tf.TensorShape(getattr(inputs[key], "shape", None))
              for key in INPUT_KEYS if key in inputs}
    got = ", ".join(f"{key} {shape}" for key, shape in shapes.items())
    if any(shape.rank not in (None, 2) for shape in shapes.values()):
        raise ValueError(f"BertEncoder inputs must be [batch, seq] tensors (one text: add a "
                         f"batch axis, `ids[tf.newaxis]`), got {got}")
    if not all(a.is_compatible_with(b) for a in shapes.values() for b in shapes.values()):
        raise ValueError(f"BertEncoder inputs must all have the same shape, got {got}")
    shape = shapes.get("input_word_ids", tf.TensorShape(None))
    if shape.rank == 2 and shape[1] == 0:
        raise ValueError(f"BertEncoder inputs have no positions (shape {shape}): every "
                         f"sequence needs at least its [CLS] token.")
