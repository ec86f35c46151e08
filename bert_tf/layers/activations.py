"""Activation functions by the names `bert_config.json` uses.

Example:
    >>> get_activation("gelu")(tf.constant([1.0]))  # exact: 0.5 * x * (1 + erf(x / sqrt(2)))
"""

import tensorflow as tf


def _gelu_exact(x):
    return tf.nn.gelu(x, approximate=False)


def _gelu_tanh(x):
    return tf.nn.gelu(x, approximate=True)


_ACTIVATIONS = {
    # Google's BERT and Hugging Face's "gelu" are the exact erf form; "gelu_new" is the tanh
    # approximation some later checkpoints were trained with. Mixing them up costs ~1e-3 per layer.
    "gelu": _gelu_exact,
    "gelu_new": _gelu_tanh,
    "relu": tf.nn.relu,
    "tanh": tf.math.tanh,
    "swish": tf.nn.silu,
    "silu": tf.nn.silu,
}


def get_activation(name):
    try:
        return _ACTIVATIONS[name]
    except KeyError:
        raise ValueError(f"Unknown activation {name!r}; known: {sorted(_ACTIVATIONS)}") from None
