"""bert_tf: BERT (Devlin et al., 2019) for TensorFlow 2 and Keras 3.

The names below are imported on first use, so `import bert_tf.cli.app` (or any module that
needs no TensorFlow) stays free of TensorFlow: the command-line tools set its logging up
before it loads.

Example:
    >>> from bert_tf import BertConfig, BertEncoder
    >>> encoder = BertEncoder(BertConfig.from_name("bert_tiny"))
"""

import importlib
import os
import sys

# Keras 3 reads its backend once, at import: this package's layers are TensorFlow code.
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
_backend = (sys.modules["keras"].backend.backend() if "keras" in sys.modules
            else os.environ["KERAS_BACKEND"])
if _backend != "tensorflow":
    raise ImportError(f"bert_tf needs the TensorFlow Keras backend, but KERAS_BACKEND is "
                      f"{_backend!r}: set KERAS_BACKEND=tensorflow.")

# tensorflow-tpu on a machine without TPU chips spends minutes in `import tensorflow` (see
# `bert_tf.training.tpu_host`): every tool, and a script importing bert_tf first, skips libtpu
# there. (tpu_host imports no TensorFlow.)
from bert_tf.training import tpu_host  # noqa: E402

tpu_host.skip_libtpu_without_tpu()

# Public name -> the module defining it.
_EXPORTS = {
    "BertConfig": "bert_tf.config",
    "BertEncoder": "bert_tf.models.bert_encoder",
    "BertClassifier": "bert_tf.models.bert_classifier",
    "BertSpanLabeler": "bert_tf.models.bert_span_labeler",
    "BertTokenClassifier": "bert_tf.models.bert_token_classifier",
    "BertMultipleChoice": "bert_tf.models.bert_multiple_choice",
    "BertFeatureExtractor": "bert_tf.models.bert_feature_extractor",
    "BertPreprocessor": "bert_tf.text.bert_preprocessor",
    "BertTokenizer": "bert_tf.text.bert_tokenizer",
    "export_preprocessor": "bert_tf.export.preprocessor_export",
}
__all__ = list(_EXPORTS)


def __getattr__(name):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'bert_tf' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS))


# Last, once `__getattr__` exists for the modules it imports: `keras.models.load_model` then
# finds this package's classes (see keras_objects).
from bert_tf import keras_objects  # noqa: E402

keras_objects.register_once_keras_is_imported()
