"""bert_tf: BERT (Devlin et al., 2019) for TensorFlow 2 and Keras 3."""

import os

# Keras 3 reads its backend once, at import: this package's layers are TensorFlow code.
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import keras  # noqa: E402

if keras.backend.backend() != "tensorflow":
    raise ImportError(f"bert_tf needs the TensorFlow Keras backend, but KERAS_BACKEND is "
                      f"{keras.backend.backend()!r}: set KERAS_BACKEND=tensorflow.")

from bert_tf.config import BertConfig  # noqa: E402
from bert_tf.models.bert_classifier import BertClassifier  # noqa: E402
from bert_tf.models.bert_encoder import BertEncoder  # noqa: E402
from bert_tf.models.bert_feature_extractor import BertFeatureExtractor  # noqa: E402
from bert_tf.models.bert_multiple_choice import BertMultipleChoice  # noqa: E402
from bert_tf.models.bert_span_labeler import BertSpanLabeler  # noqa: E402
from bert_tf.models.bert_token_classifier import BertTokenClassifier  # noqa: E402
from bert_tf.text.bert_preprocessor import BertPreprocessor  # noqa: E402
from bert_tf.text.bert_tokenizer import BertTokenizer  # noqa: E402
from bert_tf.export.preprocessor_export import export_preprocessor  # noqa: E402

__all__ = ["BertConfig", "BertEncoder", "BertClassifier", "BertSpanLabeler", "BertTokenClassifier",
           "BertMultipleChoice", "BertFeatureExtractor", "BertPreprocessor", "BertTokenizer",
           "export_preprocessor"]
