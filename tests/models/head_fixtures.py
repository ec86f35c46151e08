"""What the tests of the task models share: a tiny encoder, a stand-in preprocessor, helpers.

Example:
    >>> classifier = BertClassifier(tiny_encoder(), num_classes=2, preprocessor=ToyPreprocessor())
    >>> classifier(tf.constant(["a text"]))["logits"].shape
    TensorShape([1, 2])
"""

import os

import keras
import numpy as np
import tensorflow as tf

from bert_tf import (BertClassifier, BertConfig, BertEncoder, BertFeatureExtractor,
                     BertMultipleChoice, BertSpanLabeler, BertTokenClassifier)
from bert_tf.models.bert_pretrainer import BertPretrainer

TINY = BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                  intermediate_size=32, max_position_embeddings=16)
CLS_ID, SEP_ID = 1, 2


def tiny_encoder(seed=0, config=TINY, **kwargs):
    keras.utils.set_random_seed(seed)
    return BertEncoder(config, **kwargs)


def encoder_inputs(ids, lengths=None):
    """The encoder's input dict for int ids `[..., seq]`; positions past `lengths` are padding."""
    ids = np.asarray(ids, np.int32)
    if lengths is None:
        mask = np.ones_like(ids)
    else:
        mask = (np.arange(ids.shape[-1]) < np.asarray(lengths)[..., None]).astype(np.int32)
    return {"input_word_ids": tf.constant(ids * mask), "input_mask": tf.constant(mask),
            "input_type_ids": tf.zeros_like(tf.constant(ids))}


@keras.saving.register_keras_serializable(package="bert_tf_tests")
class ToyPreprocessor(keras.layers.Layer):
    """Stands in for the package's WordPiece preprocessor: strings (or a tuple of string
    segments) to the encoder's input dict, with words hashed into `[3, vocab_size)` and BERT's
    packing `[CLS] A [SEP] B [SEP]`, truncated and padded to `seq_length`."""

    def __init__(self, vocab_size=TINY.vocab_size, seq_length=8, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.seq_length = seq_length
        # String ops have no XLA kernels: tell Keras not to jit-compile models holding this.
        self.supports_jit = False

    def call(self, texts):
        segments = texts if isinstance(texts, (tuple, list)) else (texts,)
        ids, type_ids = [], []
        for index, text in enumerate(segments):
            words = tf.strings.split(tf.strings.lower(text))
            segment = tf.strings.to_hash_bucket_fast(words, self.vocab_size - 3) + 3
            if index == 0:
                segment = tf.concat([tf.fill([segment.nrows(), 1], tf.constant(CLS_ID, tf.int64)),
                                     segment], axis=1)
            segment = tf.concat([segment, tf.fill([segment.nrows(), 1],
                                                  tf.constant(SEP_ID, tf.int64))], axis=1)
            ids.append(segment)
            type_ids.append(tf.ones_like(segment) * index)
        shape = [None, self.seq_length]
        ids = tf.concat(ids, axis=1)[:, :self.seq_length].to_tensor(shape=shape)
        type_ids = tf.concat(type_ids, axis=1)[:, :self.seq_length].to_tensor(shape=shape)
        return {"input_word_ids": tf.cast(ids, tf.int32),
                "input_mask": tf.cast(ids > 0, tf.int32),
                "input_type_ids": tf.cast(type_ids, tf.int32)}

    def get_config(self):
        config = super().get_config()
        config.update(vocab_size=self.vocab_size, seq_length=self.seq_length)
        return config


def save_and_load(model, tmp_path):
    path = os.path.join(tmp_path, "model.keras")
    model.save(path)
    return keras.models.load_model(path)


def dense_numpy(dense, x):
    """What a Keras Dense layer computes, in numpy."""
    return np.asarray(x) @ dense.kernel.numpy() + dense.bias.numpy()


def fit_losses(model, x, y, loss, epochs=8, learning_rate=3e-3, **compile_kwargs):
    """Per-epoch training losses of `model` on `(x, y)`."""
    keras.utils.set_random_seed(0)
    model.compile(optimizer=keras.optimizers.Adam(learning_rate), loss=loss, **compile_kwargs)
    return model.fit(x, y, epochs=epochs, batch_size=16, verbose=0).history["loss"]


def every_model():
    """`{class name: (make, inputs)}` for every public Keras model of the package: a function
    making a tiny one (same weights at each call) and inputs it takes."""
    inputs = encoder_inputs([[1, 5, 6, 2, 0], [1, 7, 2, 0, 0]], lengths=[4, 3])
    return {
        "BertEncoder": (tiny_encoder, inputs),
        "BertPretrainer": (lambda: BertPretrainer(tiny_encoder()),
                           {**inputs, "masked_lm_positions": tf.constant([[1, 2], [1, 0]])}),
        "BertClassifier": (lambda: BertClassifier(tiny_encoder(), num_classes=3), inputs),
        "BertSpanLabeler": (lambda: BertSpanLabeler(tiny_encoder()), inputs),
        "BertTokenClassifier": (lambda: BertTokenClassifier(tiny_encoder(), num_classes=4),
                                inputs),
        "BertMultipleChoice": (lambda: BertMultipleChoice(tiny_encoder()),
                               encoder_inputs([[[1, 5, 2], [1, 6, 2]]])),
        "BertFeatureExtractor": (
            lambda: BertFeatureExtractor(tiny_encoder(), layer_indices=[0, 1],
                                         combine="weighted_sum"), inputs),
    }
