"""The Keras `Model` API a notebook uses: JSON and `clone_model` round trips and `.weights.h5`
files on every public model of the package; `fit` / `evaluate` / `predict` on a `tf.data`
dataset and training resumed from a compiled model saved with its optimizer. (Config and
`.keras` round trips: `tests/harness.py`; `export`: `test_saved_model_export.py`.)"""

import dataclasses

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf import BertClassifier
from tests.harness import assert_outputs_close
from tests.models.head_fixtures import TINY, every_model, tiny_encoder

MODELS = every_model()


def scrambled(model):
    """`model` with every weight set to other values: what loading must overwrite."""
    for variable in model.weights:
        variable.assign(np.full(variable.shape, 0.01, variable.dtype))
    return model


@pytest.mark.parametrize("name", sorted(MODELS))
def test_json_clone_and_weights_files_round_trip(name, tmp_path):
    make, inputs = MODELS[name]
    model = make()
    expected = model(inputs)

    from_json = keras.models.model_from_json(model.to_json())
    clone = keras.models.clone_model(model)
    assert type(from_json) is type(model)
    # Keras clones every functional subclass (BertEncoder is one) as a plain functional Model.
    assert type(clone).__name__ == ("Functional" if name == "BertEncoder" else name)
    for copy in (from_json, clone):
        copy.set_weights(model.get_weights())
        # (The functional clone runs op by op, not as the encoder's one graph: rounding.)
        assert_outputs_close(copy(inputs), expected, atol=1e-6)

    path = str(tmp_path / "model.weights.h5")
    model.save_weights(path)
    restored = scrambled(make())
    restored.load_weights(path)
    assert_outputs_close(restored(inputs), expected, atol=0)


def test_a_saved_compiled_model_resumes_training_where_it_stopped(tmp_path):
    # Without dropout: Keras' `.keras` files do not keep dropout's random state.
    config = dataclasses.replace(TINY, hidden_dropout_prob=0.0,
                                 attention_probs_dropout_prob=0.0)
    model = BertClassifier(tiny_encoder(config=config), num_classes=3)
    inputs = MODELS["BertClassifier"][1]
    dataset = tf.data.Dataset.from_tensor_slices((inputs, {"logits": [0, 2]})).batch(1)
    model.compile(optimizer=keras.optimizers.AdamW(1e-2),
                  loss={"logits": keras.losses.SparseCategoricalCrossentropy(from_logits=True)})
    model.fit(dataset, verbose=0)
    assert set(model.evaluate(dataset, verbose=0, return_dict=True)) == {"loss"}
    assert_outputs_close(model.predict(dataset.map(lambda x, y: x), verbose=0), model(inputs),
                         atol=1e-5)
    model.save(str(tmp_path / "model.keras"))
    resumed = keras.models.load_model(str(tmp_path / "model.keras"))
    assert int(resumed.optimizer.iterations) == int(model.optimizer.iterations) == 2
    assert_outputs_close(resumed.optimizer.variables, model.optimizer.variables, atol=0)
    model.fit(dataset, verbose=0)
    resumed.fit(dataset, verbose=0)
    assert_outputs_close(resumed.weights, model.weights, atol=1e-6)
