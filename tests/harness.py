"""One call that checks what every Keras layer, and one that checks what every task model, of
the package must do.

`check_layer` builds the layer, runs it, compares the output shape, rebuilds it from
`get_config()` with the same weights and compares outputs, then saves a model wrapping it to
`.keras` and loads it back, comparing outputs again.

`check_task_model` runs a task model (`BertClassifier`, ...) eagerly and compiled with XLA and
compares; saves it to `.keras` and loads it back; writes it as fine-tuning does and restores it
into a fresh copy with `bert_tf.checkpoints.load_model`; each round trip must give the same
outputs exactly.

Example:
    >>> check_layer(BertSelfAttention, {"hidden_size": 8, "num_heads": 2},
    ...             call_args=(tf.random.normal([2, 5, 8]), tf.ones([2, 5], tf.int32)),
    ...             expected_shape=(2, 5, 8))
    >>> check_task_model(BertClassifier(encoder, num_classes=3), inputs)
"""

import json
import os
import tempfile

import keras
import numpy as np
import tensorflow as tf

from bert_tf.checkpoints import load_model, training_checkpoint, write_model_files


def ops_feeding(ops):
    """`ops` and every graph op they depend on, through data and control inputs."""
    seen, stack = set(), list(ops)
    while stack:
        op = stack.pop()
        if op not in seen:
            seen.add(op)
            stack += [t.op for t in op.inputs] + list(op.control_inputs)
    return seen


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


def check_task_model(model, inputs, raw_inputs=None, xla=True, load_arguments=None):
    """Checks the round trips every task model must survive; returns the `.keras` copy.

    Args:
      model: a task model over a `BertEncoder`.
      inputs: the encoder's input dict (or whatever the model takes without a preprocessor).
      raw_inputs: raw text, when the model has a preprocessor: checked through `.keras` too.
      xla: compare `tf.function(jit_compile=True)` with eager (off for models whose
        preprocessor has no XLA kernels: string ops).
      load_arguments: head arguments `load_model` cannot read from a checkpoint (e.g. a
        feature extractor's `layer_indices`); the number of classes it reads itself.
    """
    expected = model(inputs)
    if xla:
        assert_outputs_close(tf.function(model, jit_compile=True)(inputs), expected, atol=1e-5)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.keras")
        model.save(path)
        restored = keras.models.load_model(path)
        assert type(restored) is type(model)
        # Compared as JSON, what `.keras` stores: a called preprocessor's build_config holds
        # its input shape as a tuple, which comes back as a list.
        assert (json.dumps(restored.get_config(), sort_keys=True)
                == json.dumps(model.get_config(), sort_keys=True))
        assert_outputs_close(restored(inputs), expected, atol=0)
        if raw_inputs is not None:
            assert_outputs_close(restored(raw_inputs), model(raw_inputs), atol=0)

        directory = os.path.join(tmp, "fine_tuned")
        training_checkpoint(model.encoder, task_model=model).write(os.path.join(directory,
                                                                               "ckpt-1"))
        write_model_files(directory, model.encoder.config)
        loaded = load_model(directory, type(model), **(load_arguments or {}))
        assert type(loaded) is type(model)
        assert_outputs_close(loaded(inputs), expected, atol=0)
    return restored
