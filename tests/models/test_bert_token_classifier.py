import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.models.bert_token_classifier import BertTokenClassifier
from tests.harness import assert_outputs_close, check_task_model
from tests.models.head_fixtures import (
    TINY, ToyPreprocessor, dense_numpy, encoder_inputs, fit_losses, tiny_encoder)

INPUTS = encoder_inputs(np.arange(3, 3 + 2 * 7).reshape(2, 7), lengths=[7, 4])


@pytest.fixture(scope="module")
def tagger():
    return BertTokenClassifier(tiny_encoder(), num_classes=5)


def test_logits_are_a_dense_layer_on_every_token(tagger):
    logits = tagger(INPUTS)["logits"]
    assert logits.shape == (2, 7, 5) and logits.dtype == tf.float32
    sequence = tagger.encoder(INPUTS)["sequence_output"]
    np.testing.assert_allclose(logits, dense_numpy(tagger.classifier, sequence), atol=1e-6)


def test_xla_keras_file_and_checkpoint_round_trips(tagger):
    check_task_model(tagger, INPUTS)


def test_round_trips_with_preprocessor():
    preprocessor = ToyPreprocessor()
    tagger = BertTokenClassifier(tiny_encoder(), num_classes=3, dropout_rate=0.0,
                                 preprocessor=preprocessor)
    texts = tf.constant(["John lives in Berlin", "Hi"])
    assert_outputs_close(tagger(texts)["logits"], tagger(preprocessor(texts))["logits"], atol=0)
    restored = check_task_model(tagger, INPUTS, raw_inputs=texts, xla=False)
    assert restored.num_classes == 3


def test_fit_with_ignored_padding_labels():
    # Tag each token by its id modulo 3; padding positions carry label -1 and are ignored.
    rng = np.random.default_rng(0)
    ids = rng.integers(3, TINY.vocab_size, (64, 8))
    lengths = rng.integers(3, 9, 64)
    inputs = encoder_inputs(ids, lengths)
    labels = np.where(inputs["input_mask"].numpy() == 1, ids % 3, -1)
    tagger = BertTokenClassifier(tiny_encoder(), num_classes=3)
    losses = fit_losses(tagger, inputs, labels, keras.losses.SparseCategoricalCrossentropy(
        from_logits=True, ignore_class=-1))
    assert losses[-1] < 0.5 * losses[0], losses


def test_bad_num_classes():
    with pytest.raises(ValueError, match="num_classes must be a positive integer, got 2.5"):
        BertTokenClassifier(tiny_encoder(), num_classes=2.5)
