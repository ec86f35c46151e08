"""The encoder SavedModel (`--export_type=encoder_with_mlm`) and its consumers: TF Hub's
reusable-SavedModel API, hub.KerasLayer fine-tuning in tf_keras, Keras 3's TFSMLayer and
saved_model_cli (a fresh process: test_fresh_process.py).

The model is exported once, by the tool in its own process, and then moved (conftest.py):
every test uses the moved copy."""

import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from tests.export.tiny_models import encoder_inputs

ATOL = 1e-5


@pytest.fixture(scope="module")
def loaded(encoder_export_dir):
    return tf.saved_model.load(encoder_export_dir)


def batches():
    """Two batches with different batch sizes and sequence lengths."""
    return [encoder_inputs([[2, 5, 6, 3], [2, 7, 8, 9, 3, 16, 3]], seq_length=9),
            encoder_inputs([[2, 10, 11, 12, 6, 20, 3, 5, 6, 3, 13, 14, 3]], seq_length=13)]


def assert_encoder_outputs(outputs, expected):
    for key in ("sequence_output", "pooled_output"):
        np.testing.assert_allclose(outputs[key], expected[key], atol=ATOL)
    np.testing.assert_allclose(outputs["default"], expected["pooled_output"], atol=ATOL)
    assert len(outputs["encoder_outputs"]) == len(expected["encoder_outputs"]) == 2
    for got, want in zip(outputs["encoder_outputs"], expected["encoder_outputs"]):
        np.testing.assert_allclose(got, want, atol=ATOL)


def test_call_equals_the_keras_encoder_for_any_batch_and_length(loaded, pretrained):
    encoder = pretrained[1].encoder
    for inputs in batches():
        expected = encoder(inputs, training=False)
        assert_encoder_outputs(loaded(inputs, training=False), expected)
        assert_encoder_outputs(loaded(inputs), expected)           # training defaults to False
        assert_encoder_outputs(loaded.serve(inputs), expected)


def test_serving_signature_has_named_flat_outputs(loaded, pretrained):
    inputs = batches()[0]
    expected = pretrained[1].encoder(inputs, training=False)
    outputs = loaded.signatures["serving_default"](**inputs)
    assert sorted(outputs) == ["default", "encoder_outputs_0", "encoder_outputs_1",
                               "pooled_output", "sequence_output"]
    np.testing.assert_allclose(outputs["sequence_output"], expected["sequence_output"], atol=ATOL)
    np.testing.assert_allclose(outputs["encoder_outputs_0"], expected["encoder_outputs"][0],
                               atol=ATOL)


def test_mlm_equals_the_pretrainer(loaded, pretrained):
    inputs = batches()[0]
    mlm_inputs = {**inputs, "masked_lm_positions": tf.constant([[1, 2, 0], [3, 5, 1]])}
    expected = pretrained[1](mlm_inputs, training=False)["mlm_logits"]
    assert expected.shape == (2, 3, pretrained[1].encoder.config.vocab_size)
    np.testing.assert_allclose(loaded.mlm(mlm_inputs)["mlm_logits"], expected, atol=ATOL)
    np.testing.assert_allclose(loaded.mlm(mlm_inputs, training=False)["mlm_logits"], expected,
                               atol=ATOL)
    signature_outputs = loaded.signatures["mlm"](**mlm_inputs)
    np.testing.assert_allclose(signature_outputs["mlm_logits"], expected, atol=ATOL)
    np.testing.assert_allclose(signature_outputs["pooled_output"],
                               loaded(inputs)["pooled_output"], atol=ATOL)


def test_mlm_refuses_more_predictions_than_tokens(loaded, pretrained):
    # Its logits are [batch, predictions, vocab_size]: without the bound, a request of a million
    # positions would claim 122 GB at BERT's vocabulary.
    inputs = batches()[0]  # 9 tokens per row
    with pytest.raises(tf.errors.InvalidArgumentError, match="masked_lm_positions holds more "
                       "positions per row than input_word_ids has tokens"):
        loaded.signatures["mlm"](**inputs, masked_lm_positions=tf.zeros([2, 10], tf.int32))
    logits = loaded.mlm({**inputs, "masked_lm_positions": tf.zeros([2, 9], tf.int32)})
    assert logits["mlm_logits"].shape == (2, 9, pretrained[1].encoder.config.vocab_size)


def test_training_true_applies_dropout(loaded):
    inputs = batches()[0]
    inference = [loaded(inputs, training=False)["sequence_output"] for _ in range(2)]
    training = [loaded(inputs, training=True)["sequence_output"] for _ in range(2)]
    np.testing.assert_array_equal(inference[0], inference[1])
    assert np.abs(training[0] - inference[0]).max() > 1e-3
    assert np.abs(training[0] - training[1]).max() > 1e-3          # fresh masks per call


def test_carries_vocab_casing_and_variables(loaded, pretrained, encoder_export_dir, vocab_file):
    vocab_path = loaded.vocab_file.asset_path.numpy().decode()
    assert vocab_path.startswith(encoder_export_dir)                       # inside the moved copy
    with open(vocab_path) as got, open(vocab_file) as want:
        assert got.read() == want.read()
    assert loaded.do_lower_case.numpy()
    encoder = pretrained[1].encoder
    assert len(loaded.variables) == len(encoder.variables)
    assert len(loaded.trainable_variables) == len(encoder.trainable_variables) > 0
    assert all(v.trainable for v in loaded.trainable_variables)
    assert list(loaded.regularization_losses) == []


def test_mlm_carries_the_encoders_and_the_heads_variables(loaded, pretrained):
    pretrainer = pretrained[1]
    variables, trainable = loaded.mlm.variables, loaded.mlm.trainable_variables
    assert len(variables) == len(pretrainer.encoder.variables) + len(
        pretrainer.masked_lm.variables)
    assert len({id(v) for v in variables}) == len(variables)        # word embeddings once
    assert {id(v) for v in loaded.variables} < {id(v) for v in variables}   # shared, not copied
    assert len(trainable) == len(pretrainer.encoder.trainable_variables) + len(
        pretrainer.masked_lm.trainable_variables)
    assert {"embeddings/word_embeddings:0", "masked_lm/output_bias:0",
            "masked_lm/transform/kernel:0"} <= {v.name for v in trainable}
    assert all(v.trainable for v in trainable)
    assert list(loaded.mlm.regularization_losses) == []


def test_mlm_training_true_applies_dropout(loaded):
    inputs = {**batches()[0], "masked_lm_positions": tf.constant([[1, 2, 0], [3, 5, 1]])}
    inference = [loaded.mlm(inputs, training=False)["mlm_logits"] for _ in range(2)]
    training = loaded.mlm(inputs, training=True)["mlm_logits"]
    np.testing.assert_array_equal(inference[0], inference[1])
    np.testing.assert_array_equal(loaded.mlm(inputs)["mlm_logits"], inference[0])
    assert np.abs(training - inference[0]).max() > 1e-3


def test_wrong_inputs_are_refused_with_the_expected_signature(loaded):
    inputs = batches()[0]
    with pytest.raises((TypeError, ValueError), match="input_word_ids"):
        loaded({key: tf.cast(value, tf.int64) for key, value in inputs.items()})
    with pytest.raises((TypeError, ValueError), match="input_type_ids"):
        loaded({"input_word_ids": inputs["input_word_ids"], "input_mask": inputs["input_mask"]})


def test_hub_keras_layer_fine_tunes_inside_a_tf_keras_model(encoder_export_dir, pretrained):
    import tensorflow_hub as hub
    import tf_keras

    inputs = batches()[0]
    layer = hub.KerasLayer(encoder_export_dir, trainable=True)
    assert_encoder_outputs(layer(inputs, training=False), pretrained[1].encoder(inputs))
    keras_inputs = {key: tf_keras.Input(shape=(None,), dtype=tf.int32, name=key)
                    for key in inputs}
    logits = tf_keras.layers.Dense(2)(layer(keras_inputs)["pooled_output"])
    model = tf_keras.Model(keras_inputs, logits)
    # Eagerly: the hub layer's variables are trained the same way, and the test skips building
    # tf_keras' train graph around the SavedModel's (slow on a shared 2-core CI machine).
    model.compile(optimizer=tf_keras.optimizers.Adam(1e-2),
                  loss=tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  run_eagerly=True)
    # Every encoder weight, not just the new Dense layer, is trained.
    assert len(model.trainable_weights) == len(layer.trainable_weights) + 2
    before = [w.numpy() for w in layer.trainable_weights]
    model.fit(inputs, tf.constant([0, 1]), epochs=2, verbose=0)
    changed = [not np.array_equal(b, w.numpy()) for b, w in zip(before, layer.trainable_weights)]
    assert all(changed), f"{changed.count(False)} encoder weights did not change"


def test_hub_keras_layer_continues_pre_training_the_mlm_head(encoder_export_dir, pretrained):
    import tensorflow_hub as hub
    import tf_keras

    # A copy of its own: training changes the variables of the SavedModel it loaded.
    layer = hub.KerasLayer(hub.load(encoder_export_dir).mlm, trainable=True)
    inputs = {**batches()[0], "masked_lm_positions": tf.constant([[1, 2, 0], [3, 5, 1]])}
    np.testing.assert_allclose(layer(inputs, training=False)["mlm_logits"],
                               pretrained[1](inputs, training=False)["mlm_logits"], atol=ATOL)
    keras_inputs = {key: tf_keras.Input(shape=(None,), dtype=tf.int32, name=key)
                    for key in inputs}
    model = tf_keras.Model(keras_inputs, layer(keras_inputs)["mlm_logits"])
    # Eagerly, as the encoder's fine-tuning test above.
    model.compile(optimizer=tf_keras.optimizers.Adam(1e-2),
                  loss=tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  run_eagerly=True)
    masked_ids = tf.constant([[5, 6, 2], [7, 3, 2]])
    weights = {w.name: w for w in model.trainable_weights}
    watched = ("embeddings/word_embeddings:0", "masked_lm/output_bias:0",
               "masked_lm/transform/kernel:0")
    before = {name: weights[name].numpy() for name in watched}
    loss_before = model.evaluate(inputs, masked_ids, verbose=0)
    model.fit(inputs, masked_ids, epochs=5, verbose=0)
    for name in watched:
        assert not np.array_equal(before[name], weights[name].numpy()), name
    assert model.evaluate(inputs, masked_ids, verbose=0) < loss_before


def test_tfsm_layer_inside_a_keras3_model(encoder_export_dir, pretrained):
    import keras

    inputs = batches()[1]
    keras_inputs = {key: keras.Input(shape=(None,), dtype="int32", name=key) for key in inputs}
    pooled = keras.layers.TFSMLayer(encoder_export_dir)(keras_inputs)["pooled_output"]
    model = keras.Model(keras_inputs, pooled)
    np.testing.assert_allclose(model(inputs), pretrained[1].encoder(inputs)["pooled_output"],
                               atol=ATOL)


def test_tfsm_layer_on_serving_default_gives_the_signature_outputs(encoder_export_dir, loaded,
                                                                   pretrained):
    import keras

    inputs = batches()[1]
    outputs = keras.layers.TFSMLayer(encoder_export_dir, call_endpoint="serving_default")(inputs)
    expected = loaded.signatures["serving_default"](**inputs)
    assert sorted(outputs) == sorted(expected)
    for name in expected:
        np.testing.assert_array_equal(outputs[name], expected[name], err_msg=name)
    np.testing.assert_allclose(outputs["pooled_output"],
                               pretrained[1].encoder(inputs)["pooled_output"], atol=ATOL)


def test_saved_model_cli_lists_the_signatures(encoder_export_dir):
    cli = os.path.join(os.path.dirname(sys.executable), "saved_model_cli")
    result = subprocess.run([cli, "show", "--dir", encoder_export_dir, "--all"], capture_output=True,
                            text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    shown = result.stdout
    serving = shown.split("signature_def['serving_default']")[1].split("signature_def[")[0]
    for name in ("input_word_ids", "input_mask", "input_type_ids"):
        assert f"inputs['{name}'] tensor_info:\n        dtype: DT_INT32\n        shape: (-1, -1)" \
            in serving
    for name in ("sequence_output", "pooled_output", "default", "encoder_outputs_0",
                 "encoder_outputs_1"):
        assert f"outputs['{name}']" in serving
    mlm = shown.split("signature_def['mlm']")[1].split("signature_def[")[0]
    assert "inputs['masked_lm_positions']" in mlm and "outputs['mlm_logits']" in mlm
