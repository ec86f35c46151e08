"""This package's Keras-serializable classes, registered together so that
`keras.models.load_model` finds every class a `.keras` file names ("bert_tf>BertPretrainer"...).

Keras imports the module of a saved class only for its own packages (keras, keras_hub...); any
other class must be registered (`keras.saving.register_keras_serializable`), i.e. its module
imported, before the file loads. `import bert_tf` registers them all, at once when Keras is
loaded already, else right after Keras is imported (`bert_tf_post_import`), whoever imports it:
0.24 s after Keras' own 2.4 s (2-vCPU Intel Xeon, TF 2.21). Without it, a fresh process that
saved nothing itself got "Could not locate class 'BertEncoder'", or found the classes its
imports happened to pull in.

Example:
    >>> import bert_tf
    >>> import keras
    >>> classifier = keras.models.load_model("classifier.keras")
"""

import importlib

from bert_tf_post_import import call_after_import

# Every module with a `register_keras_serializable` class (tests/test_keras_objects.py checks
# the list against the sources).
MODULES = (
    "bert_tf.layers.dropout",
    "bert_tf.layers.embeddings",
    "bert_tf.layers.masked_lm_head",
    "bert_tf.layers.next_sentence_head",
    "bert_tf.layers.self_attention",
    "bert_tf.layers.transformer_block",
    "bert_tf.layers.weighted_layer_sum",
    "bert_tf.models.bert_classifier",
    "bert_tf.models.bert_encoder",
    "bert_tf.models.bert_feature_extractor",
    "bert_tf.models.bert_multiple_choice",
    "bert_tf.models.bert_pretrainer",
    "bert_tf.models.bert_span_labeler",
    "bert_tf.models.bert_task_model",
    "bert_tf.models.bert_token_classifier",
    "bert_tf.text.bert_preprocessor",
    "bert_tf.training.lamb",
    "bert_tf.training.optimizers",
    "bert_tf.training.schedule",
)


def register_once_keras_is_imported():
    """Imports `MODULES` now if Keras is imported, else right after it is; never imports Keras
    itself (that would load TensorFlow, which the command-line tools load only after setting
    up its logging)."""
    # Keras is often imported by a module of this package (`from bert_tf.models.bert_encoder
    # import ...`), which is then half run: MODULES importing names from it would fail.
    call_after_import("keras", _import_modules, wait_for=__package__)


def _import_modules():
    for module in MODULES:
        importlib.import_module(module)
