import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf import BertEncoder
from bert_tf.models.bert_classifier import BertClassifier
from tests.harness import assert_outputs_close, check_task_model
from tests.models.head_fixtures import (
    TINY, ToyPreprocessor, dense_numpy, encoder_inputs, fit_losses, save_and_load, tiny_encoder)


def random_inputs(batch=4, seq=7, seed=0):
    rng = np.random.default_rng(seed)
    return encoder_inputs(rng.integers(3, TINY.vocab_size, (batch, seq)),
                          lengths=rng.integers(2, seq + 1, batch))


def test_logits_are_a_dense_layer_on_the_pooled_output():
    classifier = BertClassifier(tiny_encoder(), num_classes=3)
    inputs = random_inputs()
    logits = classifier(inputs)["logits"]
    pooled = classifier.encoder(inputs)["pooled_output"]
    assert logits.shape == (4, 3) and logits.dtype == tf.float32
    np.testing.assert_allclose(logits, dense_numpy(classifier.classifier, pooled), atol=1e-6)


def test_defaults_come_from_the_encoder_config():
    classifier = BertClassifier(tiny_encoder(), num_classes=2)
    assert classifier.dropout.rate == TINY.hidden_dropout_prob
    initializer = classifier.classifier.kernel_initializer
    assert isinstance(initializer, keras.initializers.TruncatedNormal)
    assert initializer.stddev == TINY.initializer_range
    custom = BertClassifier(tiny_encoder(), num_classes=2, dropout_rate=0.3, initializer="zeros")
    assert custom.dropout.rate == 0.3
    np.testing.assert_array_equal(custom.classifier.kernel.numpy(), 0.0)


def test_dropout_only_in_training():
    classifier = BertClassifier(tiny_encoder(), num_classes=2)
    inputs = random_inputs()
    assert not np.allclose(classifier(inputs, training=True)["logits"],
                           classifier(inputs, training=True)["logits"])
    assert_outputs_close(classifier(inputs, training=False), classifier(inputs), atol=0)


def test_xla_keras_file_and_checkpoint_round_trips_nest_the_encoder():
    classifier = BertClassifier(tiny_encoder(), num_classes=3, dropout_rate=0.2)
    restored = check_task_model(classifier, random_inputs())
    assert isinstance(restored.encoder, BertEncoder)
    assert restored.encoder.config == TINY and restored.preprocessor is None


def test_fit_learns_a_toy_task_and_fine_tunes_the_users_encoder():
    # Label: does token 5 occur in the sequence?
    rng = np.random.default_rng(1)
    ids = rng.integers(6, TINY.vocab_size, (64, 8))
    labels = rng.integers(0, 2, 64)
    ids[labels == 1, rng.integers(1, 8, int(labels.sum()))] = 5
    encoder = tiny_encoder()
    embeddings_before = encoder.embeddings.word_embeddings.numpy()
    classifier = BertClassifier(encoder, num_classes=2)
    losses = fit_losses(classifier, encoder_inputs(ids), labels,
                        keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    assert losses[-1] < 0.75 * losses[0], losses
    # The classifier trains the encoder object the user passed in, not a copy.
    assert not np.allclose(encoder.embeddings.word_embeddings.numpy(), embeddings_before)


def test_regression_with_one_output():
    rng = np.random.default_rng(2)
    ids = rng.integers(3, TINY.vocab_size, (64, 6))
    targets = (ids == 5).sum(axis=1).astype(np.float32) + (ids[:, 0] % 3)
    regressor = BertClassifier(tiny_encoder(), num_classes=1)
    losses = fit_losses(regressor, encoder_inputs(ids), targets[:, None], "mse", epochs=6)
    assert losses[-1] < 0.5 * losses[0], losses


def test_raw_strings_through_a_preprocessor(tmp_path):
    preprocessor = ToyPreprocessor()
    classifier = BertClassifier(tiny_encoder(), num_classes=2, preprocessor=preprocessor)
    texts = tf.constant(["a good film", "a bad film", ""])
    logits = classifier(texts)["logits"]
    assert_outputs_close(logits, classifier(preprocessor(texts))["logits"], atol=0)
    restored = save_and_load(classifier, tmp_path)
    assert isinstance(restored.preprocessor, ToyPreprocessor)
    assert_outputs_close(restored(texts)["logits"], logits, atol=0)


def test_fit_and_predict_on_raw_strings():
    texts = ["good film", "bad film", "great movie", "awful movie", "nice", "poor"]
    labels = np.array([1, 0, 1, 0, 1, 0])
    classifier = BertClassifier(tiny_encoder(), num_classes=2, preprocessor=ToyPreprocessor())
    losses = fit_losses(classifier, tf.constant(texts * 6), np.tile(labels, 6),
                        keras.losses.SparseCategoricalCrossentropy(from_logits=True), epochs=10,
                        learning_rate=1e-2)
    assert losses[-1] < 0.5 * losses[0], losses
    predictions = classifier.predict(tf.constant(texts), verbose=0)["logits"].argmax(-1)
    np.testing.assert_array_equal(predictions, labels)


def test_encoder_loaded_from_a_file(tmp_path):
    # What a user does with a converted checkpoint: load the encoder, then put a head on it.
    encoder = save_and_load(tiny_encoder(seed=3), tmp_path)
    classifier = BertClassifier(encoder, num_classes=2)
    inputs = random_inputs()
    np.testing.assert_allclose(classifier(inputs)["logits"], dense_numpy(
        classifier.classifier, encoder(inputs)["pooled_output"]), atol=1e-6)


def test_mixed_precision_encoder_gives_float32_logits():
    classifier = BertClassifier(tiny_encoder(dtype="mixed_bfloat16"), num_classes=2)
    logits = classifier(random_inputs())["logits"]
    assert logits.dtype == tf.float32 and classifier.classifier.kernel.dtype == "float32"


def test_bad_arguments_and_inputs_are_clear_errors():
    encoder = tiny_encoder()
    with pytest.raises(ValueError, match="num_classes must be a positive integer, got 0"):
        BertClassifier(encoder, num_classes=0)
    with pytest.raises(TypeError, match="`encoder` must be a bert_tf.BertEncoder.*got Dense"):
        BertClassifier(keras.layers.Dense(2), num_classes=2)
    classifier = BertClassifier(encoder, num_classes=2)
    inputs = random_inputs()
    del inputs["input_mask"]
    with pytest.raises(ValueError, match=r"exactly the keys .*got a dict with keys "
                                         r"\['input_type_ids', 'input_word_ids'\]"):
        classifier(inputs)
    with pytest.raises(ValueError, match="build it with a `preprocessor`"):
        classifier(tf.constant(["raw text"]))
    with pytest.raises(ValueError, match="input 'input_word_ids' must have rank 2, got shape"):
        classifier(encoder_inputs(np.ones([2, 3, 4])))
