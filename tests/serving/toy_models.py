"""Small SavedModels in TF Serving's layout, for testing the server without BERT.

`write_toy_model(base_path, version)` writes `<base_path>/<version>/saved_model.pb` with three
signatures that cover what the server must handle:

- `serving_default`: raw strings `text [batch]` -> `length` (int32 UTF-8 characters, decoded
  strictly, so invalid UTF-8 makes the model raise INVALID_ARGUMENT), `upper` (string),
  `version` (int64, the version written: tells versions apart), `text_bytes` (the input back).
- `scale`: two float inputs `x [batch, 3]`, `factor [batch]` -> one output `y = x * factor`.
- `tensorflow/serving/classify` (that method name too): serialized tf.Example `inputs` with
  float feature `x` -> `scores` `[[x, 1 - x]]` and `classes` `[["pos", "neg"]]`.
- `tensorflow/serving/regress` (that method name too): the same `inputs` -> `outputs` `2 x`.
- `fill`: `x [batch]` (float) and `width [batch]` (int32) -> `y [batch, max(width)]`,
  `y[i, j] = x[i] / (j + 1)`: a request of a few bytes asks for an answer as large as it likes.

Example:
    >>> write_toy_model("/tmp/models/toy", version=1)
    '/tmp/models/toy/1'
"""

import os

import tensorflow as tf

from bert_tf.export.example_signatures import CLASSIFY as CLASSIFY_SIGNATURE
from bert_tf.export.example_signatures import REGRESS as REGRESS_SIGNATURE
from bert_tf.export.example_signatures import set_method_names


class _ToyModel(tf.Module):
    def __init__(self, version):
        super().__init__()
        self.version = tf.constant(version, tf.int64)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    def predict(self, text):
        characters = tf.strings.unicode_decode(text, "UTF-8", errors="strict")
        return {"length": tf.cast(characters.row_lengths(), tf.int32),
                "upper": tf.strings.upper(text),
                "version": tf.fill(tf.shape(text), self.version),
                "text_bytes": tf.identity(text)}

    @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32, name="x"),
                                  tf.TensorSpec([None], tf.float32, name="factor")])
    def scale(self, x, factor):
        return {"y": x * factor[:, None]}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32, name="x"),
                                  tf.TensorSpec([None], tf.int32, name="width")])
    def fill(self, x, width):
        return {"y": x[:, None] / tf.range(1, tf.reduce_max(width) + 1, dtype=tf.float32)}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="inputs")])
    def classify(self, inputs):
        features = tf.io.parse_example(inputs, {"x": tf.io.FixedLenFeature([], tf.float32)})
        scores = tf.stack([features["x"], 1.0 - features["x"]], axis=1)
        classes = tf.tile(tf.constant([["pos", "neg"]]), [tf.shape(scores)[0], 1])
        return {"scores": scores, "classes": classes}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="inputs")])
    def regress(self, inputs):
        features = tf.io.parse_example(inputs, {"x": tf.io.FixedLenFeature([], tf.float32)})
        return {"outputs": 2.0 * features["x"]}


def write_toy_model(base_path, version):
    """Writes the toy model as `<base_path>/<version>` and returns that directory."""
    model = _ToyModel(version)
    path = os.path.join(base_path, str(version))
    tf.saved_model.save(model, path, signatures={"serving_default": model.predict,
                                                 "scale": model.scale, "fill": model.fill,
                                                 CLASSIFY_SIGNATURE: model.classify,
                                                 REGRESS_SIGNATURE: model.regress})
    set_method_names(path, {CLASSIFY_SIGNATURE: CLASSIFY_SIGNATURE,
                            REGRESS_SIGNATURE: REGRESS_SIGNATURE})
    return path
