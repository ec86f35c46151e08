"""TF Serving's Classify and Regress for exported classifiers: signatures over tf.Examples.

TF Serving answers `Classify` and `Regress` (gRPC, and REST `:classify` / `:regress`) with the
signature whose method name is `tensorflow/serving/classify` or `tensorflow/serving/regress`.
Such a signature takes one DT_STRING input `inputs` of serialized `tf.Example`s and returns
`classes` (label strings `[batch, C]`) and `scores` (`[batch, C]`), or `outputs` (`[batch]`) for
regression. Here the examples' bytes features are named like the predict signature's inputs
(`text`, or `text_a` / `text_b`), so both APIs read the same fields.

TF2's `tf.saved_model.save` writes every method name as `tensorflow/serving/predict`;
`set_method_names` puts the right ones into `saved_model.pb` after saving.

Example:
    >>> signatures[CLASSIFY] = classify_function(predict, ["text"], ["negative", "positive"])
    >>> tf.saved_model.save(root, export_dir, signatures=signatures)
    >>> set_method_names(export_dir, {CLASSIFY: CLASSIFY})
"""

import os

import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

from bert_tf.file_io import open_file

# The signature keys are TF Serving's method names, as in TF1's Estimator exports.
CLASSIFY = tf.saved_model.CLASSIFY_METHOD_NAME  # "tensorflow/serving/classify"
REGRESS = tf.saved_model.REGRESS_METHOD_NAME  # "tensorflow/serving/regress"
_INPUTS_SPEC = tf.TensorSpec([None], tf.string, name=tf.saved_model.CLASSIFY_INPUTS)


def _parse_texts(serialized, names):
    """The bytes feature `name` of each serialized tf.Example, for every name; a missing one
    fails the request (INVALID_ARGUMENT naming the feature)."""
    features = {name: tf.io.FixedLenFeature([], tf.string) for name in names}
    parsed = tf.io.parse_example(serialized, features)
    return [parsed[name] for name in names]


def classify_function(predict, names, label_names):
    """The classify signature over `predict(*texts)` (which returns `probabilities`)."""
    label_names = tf.constant(label_names)

    def classify(inputs):
        probabilities = predict(*_parse_texts(inputs, names))["probabilities"]
        return {tf.saved_model.CLASSIFY_OUTPUT_CLASSES:
                tf.tile(label_names[None], [tf.shape(probabilities)[0], 1]),
                tf.saved_model.CLASSIFY_OUTPUT_SCORES: probabilities}

    return tf.function(classify, input_signature=[_INPUTS_SPEC],
                       autograph=False).get_concrete_function()


def regress_function(predict, names):
    """The regress signature over `predict(*texts)` (which returns `score`, `[batch]`)."""
    def regress(inputs):
        return {tf.saved_model.REGRESS_OUTPUTS: predict(*_parse_texts(inputs, names))["score"]}

    return tf.function(regress, input_signature=[_INPUTS_SPEC],
                       autograph=False).get_concrete_function()


def set_method_names(export_dir, method_names):
    """Rewrites `saved_model.pb` of `export_dir` with `{signature key: method name}`."""
    path = os.path.join(export_dir, tf.saved_model.SAVED_MODEL_FILENAME_PB)
    saved_model = saved_model_pb2.SavedModel()
    with open_file(path, "rb") as f:  # local or remote (gs://...)
        saved_model.ParseFromString(f.read())
    for meta_graph in saved_model.meta_graphs:
        for key, method_name in method_names.items():
            meta_graph.signature_def[key].method_name = method_name
    # Opening the existing file keeps its permissions.
    with open_file(path, "wb") as f:
        f.write(saved_model.SerializeToString())
