"""One call that checks what every Keras layer of the package must do.

`check_layer` builds the layer, runs it, compares the output shape, rebuilds it from
`get_config()` with the same weights and compares outputs, then saves a model wrapping it to
`.keras` and loads it back, comparing outputs again.

Example:
    >>> check_layer(BertSelfAttention, {"hidden_size": 8, "num_heads": 2},
    ...             call_args=(tf.random.normal([2, 5, 8]), tf.ones([2, 5], tf.int32)),
    ...             expected_shape=(2, 5, 8))
"""

import os
import tempfile

import keras
import numpy as np
import tensorflow as tf


def _as_numpy(outputs):
    return [np.asarray(x) for x in tf.nest.flatten(outputs)]


def assert_outputs_close(actual, expected, atol=1e-6):
    actual, expected = _as_numpy(actual), _as_numpy(expected)
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        np.testing.assert_allclose(a, e, atol=atol, rtol=0)


def check_layer(layer_cls, init_kwargs, call_args, expected_shape, call_kwargs=None):
    call_kwargs = call_kwargs or {}
    layer = layer_cls(**init_kwargs)
    output = layer(*call_args, **call_kwargs)
    assert tuple(output.shape) == tuple(expected_shape)

    config = layer.get_config()
    clone = layer_cls.from_config(config)
    clone(*call_args, **call_kwargs)
    clone.set_weights(layer.get_weights())
    assert clone.get_config() == config
    assert_outputs_close(clone(*call_args, **call_kwargs), output)

    inputs = [keras.Input(shape=tuple(a.shape[1:]), dtype=a.dtype.name) for a in call_args]
    model = keras.Model(inputs, layer(*inputs, **call_kwargs))
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.keras")
        model.save(path)
        restored = keras.models.load_model(path)
    assert_outputs_close(restored(list(call_args)), output)
    return layer
