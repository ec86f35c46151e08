"""Exports a `BertEncoder` as a TF Hub reusable SavedModel (optionally with its MLM head).

The SavedModel follows TF Hub's conventions for BERT encoders, so that `hub.KerasLayer` can
fine-tune it and TF Serving can serve it:

* the loaded object is callable, `obj(inputs, training=False)`, on a dict of int32
  `[batch, seq]` tensors `input_word_ids`, `input_mask`, `input_type_ids` (any batch size, any
  `seq` up to `max_position_embeddings`) and returns `sequence_output [batch, seq, H]`,
  `pooled_output [batch, H]`, `default` (= `pooled_output`) and `encoder_outputs` (one
  `[batch, seq, H]` per layer). `training=True` applies dropout, as fine-tuning needs;
* `obj.variables`, `obj.trainable_variables` and `obj.regularization_losses` (empty), the
  attributes through which `hub.KerasLayer(path, trainable=True)` trains the encoder;
* `obj.vocab_file` (an asset: the vocabulary travels with the model) and `obj.do_lower_case`;
* `obj.serve(inputs)`, the same call without `training`, which `keras.layers.TFSMLayer(path)`
  uses by default, and `obj.serving_default(inputs)`, the `serving_default` signature called
  with the input dict, for `TFSMLayer(path, call_endpoint="serving_default")`;
* with the MLM head, `obj.mlm(inputs, training=False)`: the same dict plus
  `masked_lm_positions` (int32 `[batch, num_predictions]`, at most `seq` predictions) gives the
  encoder's outputs plus `mlm_logits [batch, num_predictions, vocab_size]`. `obj.mlm` has its
  own `variables`, `trainable_variables` (the encoder's and the head's) and
  `regularization_losses`, so `hub.KerasLayer(obj.mlm, trainable=True)` continues pre-training.

Signatures (for TF Serving and `saved_model_cli`; tensors only, so the per-layer list is
flattened): `serving_default` takes `input_word_ids`, `input_mask`, `input_type_ids` and
returns `sequence_output`, `pooled_output`, `default` and `encoder_outputs_0` ...
`encoder_outputs_{L-1}`; `mlm` (with the head) also takes `masked_lm_positions` and adds
`mlm_logits`.

Example:
    >>> export_encoder("/tmp/bert/1", load_model("converted_dir"), "vocab.txt", True)
    >>> encoder = tf.saved_model.load("/tmp/bert/1")
    >>> inputs = {"input_word_ids": ids, "input_mask": mask, "input_type_ids": types}
    >>> encoder(inputs, training=False)["pooled_output"]
    >>> mlm = hub.KerasLayer(encoder.mlm, trainable=True)   # in a tf_keras model
    >>> mlm({**inputs, "masked_lm_positions": positions}, training=True)["mlm_logits"]
"""

import tensorflow as tf
from tensorflow.python.saved_model import save_context

from bert_tf.export.backing_variables import backing_variables
from bert_tf.export.keras_endpoint import keras_endpoint
from bert_tf.export.serving_layout import make_world_readable
from bert_tf.layers.portable_graphs import portable_graphs
from bert_tf.models.bert_encoder import INPUT_KEYS, BertEncoder
from bert_tf.models.bert_pretrainer import BertPretrainer
from bert_tf.models.saved_model_export import flat_outputs, input_specs, with_default_output

MLM_POSITIONS_KEY = "masked_lm_positions"
SAVE_OPTIONS = tf.saved_model.SaveOptions()


def export_encoder(export_dir, model, vocab_file, do_lower_case):
    """Writes `model` as an encoder SavedModel to `export_dir`.

    Args:
        export_dir: the directory to write (for TF Serving, `<model_base_path>/<version>`; see
            `serving_layout.write_version`).
        model: a `BertEncoder`, or a `BertPretrainer` to export its encoder with the MLM head
            (`obj.mlm`); the next-sentence head is not exported.
        vocab_file: the encoder's `vocab.txt`, copied into the SavedModel as an asset.
        do_lower_case: whether the vocabulary is uncased; stored for consumers that build
            their own tokenizer.
    """
    if isinstance(model, BertPretrainer):
        encoder, pretrainer = model.encoder, model
    elif isinstance(model, BertEncoder):
        encoder, pretrainer = model, None
    else:
        raise TypeError(f"export_encoder exports a BertEncoder or a BertPretrainer, got "
                        f"{type(model).__name__}.")
    # `training` must be a Python bool: the SavedModel keeps one traced graph per value (with
    # and without dropout) and hub.KerasLayer picks one with smart_cond.
    @tf.function(autograph=False)
    def call(inputs, training=False):
        return with_default_output(encoder(inputs, training=training))

    encoder_specs = input_specs(INPUT_KEYS)
    root, encoder_graphs = reusable_callable(call, encoder_specs, encoder.variables,
                                             encoder.trainable_variables)
    root.vocab_file = tf.saved_model.Asset(vocab_file)
    root.do_lower_case = tf.Variable(bool(do_lower_case), trainable=False, name="do_lower_case")
    inference = encoder_graphs[False]
    root.serve = tf.function(lambda inputs: inference(inputs, training=False),
                             input_signature=[encoder_specs], autograph=False)
    signatures = {"serving_default": tf.function(
        lambda **inputs: flat_outputs(inference(inputs, training=False)),
        autograph=False).get_concrete_function(**encoder_specs)}

    if pretrainer is not None:
        @tf.function(autograph=False)
        def mlm(inputs, training=False):
            # mlm_logits are [batch, predictions, vocab_size]: predictions beyond the tokens
            # would claim memory without bound (1,000,000 positions, 1 MB over gRPC, are 122
            # GB of logits at BERT's 30522 words), so nothing runs before they are checked.
            check = tf.debugging.assert_less_equal(
                tf.shape(inputs[MLM_POSITIONS_KEY])[1], tf.shape(inputs["input_word_ids"])[1],
                message=f"{MLM_POSITIONS_KEY} holds more positions per row than input_word_ids "
                        f"has tokens")
            with tf.control_dependencies([check]):
                inputs = {key: tf.identity(value) for key, value in inputs.items()}
            outputs = encoder_graphs[training]({key: inputs[key] for key in INPUT_KEYS},
                                               training=training)
            # What BertPretrainer.call does for its MLM output, on the same encoder outputs.
            outputs["mlm_logits"] = pretrainer.masked_lm(
                outputs["sequence_output"], inputs[MLM_POSITIONS_KEY],
                encoder.embeddings.word_embeddings)
            return outputs

        mlm_specs = input_specs(INPUT_KEYS + (MLM_POSITIONS_KEY,))
        # A callable of its own, not more root variables: __call__ does not use the head's
        # weights, and hub.KerasLayer(path) would train (and warn about) weights without
        # gradients. The head's decoder is the encoder's word embeddings, listed once.
        root.mlm, mlm_graphs = reusable_callable(
            mlm, mlm_specs, encoder.variables + pretrainer.masked_lm.variables,
            encoder.trainable_variables + pretrainer.masked_lm.trainable_variables)
        signatures["mlm"] = tf.function(
            lambda **inputs: flat_outputs(mlm_graphs[False](inputs, training=False)),
            autograph=False).get_concrete_function(**mlm_specs)
    root.serving_default = keras_endpoint(signatures["serving_default"])
    with portable_graphs():
        tf.saved_model.save(root, export_dir, signatures=signatures, options=SAVE_OPTIONS)
    make_world_readable(export_dir)


def reusable_callable(function, specs, variables, trainable_variables):
    """A trackable that TF Hub's reusable SavedModel API calls and trains: `__call__` is the
    tf.function `function(inputs, training=False)`, traced for `specs` once per `training`
    value; `variables` and `trainable_variables` (the `tf.Variable`s behind them) and empty
    `regularization_losses`. Returns it and its `{training: concrete function}`, which other
    functions of the SavedModel call.

    Example:
        >>> root, graphs = reusable_callable(call, input_specs(INPUT_KEYS), encoder.variables,
        ...                                  encoder.trainable_variables)
        >>> graphs[False](inputs, training=False)["pooled_output"]
    """
    # tf.Module computes `variables` on the fly and does not save it; the reusable SavedModel
    # API needs these lists saved as attributes, so this is a plain trackable (what Keras' own
    # ExportArchive uses).
    trackable = tf.__internal__.tracking.AutoTrackable()
    # Every variable `function` uses, including the dropout layers' RNG states, which no Keras
    # layer tracks for TensorFlow: without them here the SavedModel could not capture them.
    trackable.variables = backing_variables(variables)
    trackable.trainable_variables = backing_variables(trainable_variables)
    trackable.regularization_losses = []
    # tf.saved_model.save re-traces whatever was traced outside of saving (the save context is
    # part of the trace cache key), and a tf.function called inside another one is traced anew
    # for each caller. Tracing once here, in the save context, and calling the resulting graphs
    # everywhere else makes each function traced exactly once per `training` value.
    with save_context.save_context(SAVE_OPTIONS), portable_graphs():
        graphs = {training: function.get_concrete_function(specs, training=training)
                  for training in (False, True)}
    trackable.__call__ = function
    return trackable, graphs
