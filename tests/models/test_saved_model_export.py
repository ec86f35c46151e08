"""`model.export(path)` of every public Keras model of the package, as Keras documents it: a
SavedModel that `tf.saved_model.load` reloads, whose `serve` endpoint and `serving_default`
signature return the model's outputs (lists numbered), and that holds no XLA function."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf import BertClassifier, BertEncoder
from bert_tf.models.saved_model_export import flat_outputs
from tests.amx_forms import assume_amx_bfloat16
from tests.export.test_portable_exports import xla_functions_served
from tests.harness import assert_outputs_close
from tests.models.head_fixtures import TINY, encoder_inputs, every_model, tiny_encoder

INPUTS = encoder_inputs([[1, 5, 6, 2, 0], [1, 7, 2, 0, 0]], lengths=[4, 3])
MODELS = every_model()


def test_flat_outputs_numbers_the_lists():
    a, b, c = tf.zeros([1]), tf.ones([1]), tf.fill([1], 2.0)
    assert flat_outputs({"pooled_output": a, "encoder_outputs": [b, c]}) == {
        "pooled_output": a, "encoder_outputs_0": b, "encoder_outputs_1": c}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_export_serves_the_outputs_of_every_model(name, tmp_path):
    make, inputs = MODELS[name]
    model = make()
    model.export(str(tmp_path / "model"), verbose=False)
    loaded = tf.saved_model.load(str(tmp_path / "model"))
    expected = model.export_outputs(model(inputs))
    served = loaded.serve(inputs)
    assert sorted(served) == sorted(expected)
    signature = loaded.signatures["serving_default"](**inputs)
    for key, value in expected.items():
        np.testing.assert_allclose(served[key], value, atol=1e-6)
        np.testing.assert_allclose(signature[key], value, atol=1e-6)


def test_the_encoders_export_names_each_layers_output():
    # The list BertEncoder's outputs hold failed the export: "Got a non-Tensor value [...] for
    # key 'encoder_outputs'".
    encoder = tiny_encoder()
    assert sorted(flat_outputs(encoder(INPUTS))) == [
        *(f"encoder_outputs_{i}" for i in range(TINY.num_hidden_layers)),
        "pooled_output", "sequence_output"]


def test_the_encoders_export_adds_default_the_pooled_output(tmp_path):
    # The contract: exported encoder SavedModels add `default` (= pooled_output), as TF Hub's.
    encoder = tiny_encoder()
    encoder.export(str(tmp_path / "encoder"), verbose=False)
    served = tf.saved_model.load(str(tmp_path / "encoder")).signatures["serving_default"](
        **INPUTS)
    assert sorted(served) == sorted([
        *(f"encoder_outputs_{i}" for i in range(TINY.num_hidden_layers)), "default",
        "pooled_output", "sequence_output"])
    np.testing.assert_array_equal(served["default"], served["pooled_output"])
    assert_outputs_close(served["default"], encoder(INPUTS)["pooled_output"])


def test_keras_reloads_the_encoders_export_as_a_layer(tmp_path):
    encoder = tiny_encoder()
    encoder.export(str(tmp_path / "encoder"), verbose=False)
    layer = keras.layers.TFSMLayer(str(tmp_path / "encoder"))
    assert_outputs_close(layer(INPUTS)["sequence_output"], encoder(INPUTS)["sequence_output"])


def test_a_bfloat16_export_serves_no_xla_function(monkeypatch, tmp_path):
    # On a CPU with AMX the process runs the GELU as an XLA function, which TF Serving
    # binaries without XLA cannot load; Keras' export traced it as it was.
    assume_amx_bfloat16(monkeypatch)
    for model in (BertEncoder(TINY, dtype="mixed_bfloat16"),
                  BertClassifier(BertEncoder(TINY, dtype="mixed_bfloat16"), num_classes=2)):
        path = str(tmp_path / model.name)
        model.export(path, verbose=False)
        assert xla_functions_served(path) == []
        loaded = tf.saved_model.load(path)  # kept: its functions need its variables
        served = loaded.serve(INPUTS)
        expected = flat_outputs(model(INPUTS))
        for key in expected:
            # bfloat16 rounds the GELU's input where the export runs it inside its matmul.
            np.testing.assert_allclose(served[key], expected[key], atol=0.05)


def test_a_users_model_around_a_bfloat16_encoder_serves_no_xla_function(monkeypatch, tmp_path):
    # Keras' own export (a functional model of the user's), and tf.saved_model.save of a module:
    # both trace again in the save context, where the layers keep their portable forms.
    assume_amx_bfloat16(monkeypatch)
    encoder = BertEncoder(TINY, dtype="mixed_bfloat16")
    inputs = {key: keras.Input([None], dtype="int32", name=key) for key in INPUTS}
    model = keras.Model(inputs, keras.layers.Dense(2)(encoder(inputs)["pooled_output"]))
    model.export(str(tmp_path / "functional"), verbose=False)
    assert xla_functions_served(str(tmp_path / "functional")) == []

    module = tf.Module()
    module.encoder = encoder
    module.serve = tf.function(lambda ids: encoder(
        {"input_word_ids": ids, "input_mask": tf.ones_like(ids),
         "input_type_ids": tf.zeros_like(ids)})["pooled_output"],
        input_signature=[tf.TensorSpec([None, None], tf.int32)])
    module.serve(INPUTS["input_word_ids"])  # traced first outside saving, as a user would
    tf.saved_model.save(module, str(tmp_path / "module"))
    assert xla_functions_served(str(tmp_path / "module")) == []
    loaded = tf.saved_model.load(str(tmp_path / "module"))  # kept: its variables
    served = loaded.serve(INPUTS["input_word_ids"])
    np.testing.assert_allclose(served, module.serve(INPUTS["input_word_ids"]), atol=0.05)
