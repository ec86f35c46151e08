"""This package's Keras-serializable classes, registered together so that
`keras.models.load_model` finds every class a `.keras` file names ("bert_tf>BertPretrainer"...).

Keras imports the module of a saved class only for its own packages (keras, keras_hub...); any
other class must be registered (`keras.saving.register_keras_serializable`), i.e. its module
imported, before the file loads. `import bert_tf` registers them all when Keras is loaded
already, and so does the first name imported from `bert_tf` once it is: 0.24 s after Keras' own
2.4 s (2-vCPU Intel Xeon, TF 2.21). Without it, a fresh process that saved nothing itself got
"Could not locate class 'BertEncoder'", or found the classes its imports happened to pull in.

Example:
    >>> import keras
    >>> import bert_tf
    >>> classifier = keras.models.load_model("classifier.keras")
"""

import importlib
import sys

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


def register_if_keras_is_loaded():
    """Imports `MODULES` when Keras is imported already (else nothing: importing them would
    load TensorFlow, which the command-line tools load only after setting up its logging)."""
    if "keras" in sys.modules:
        for module in MODULES:
            importlib.import_module(module)
