"""Activation functions by the names `bert_config.json` uses.

Example:
    >>> get_activation("gelu")(tf.constant([1.0]))  # exact: 0.5 * x * (1 + erf(x / sqrt(2)))
"""

import math

import tensorflow as tf

from bert_tf.layers.bfloat16_bits import narrow, widen
from bert_tf.xla_host import host_jit_compile


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


def _normal_cdf(x):
    return 0.5 * (1.0 + tf.math.erf(x / math.sqrt(2.0)))


@tf.function(jit_compile=host_jit_compile(), autograph=False)
def _fused_gelu_forward(x):
    x32 = widen(x)
    return narrow(x32 * _normal_cdf(x32), x.dtype)


@tf.function(jit_compile=host_jit_compile(), autograph=False)
def _fused_gelu_backward(x, upstream):
    # d/dx [x * cdf(x)] = cdf(x) + x * pdf(x)
    x32 = widen(x)
    pdf = tf.exp(-0.5 * x32 * x32) / math.sqrt(2.0 * math.pi)
    return narrow(widen(upstream) * (_normal_cdf(x32) + x32 * pdf), x.dtype)


@tf.custom_gradient
def fused_gelu(x):
    """The exact GELU as one XLA loop forward and one backward (float32 inside; bfloat16
    converted as integer ops, see `bfloat16_bits`).

    For training on CPU: there TensorFlow cannot fuse the GELU into the matmul (the gradient
    needs its input) and runs it as separate element-wise ops, forward and backward. On a
    bert_base FFN activation (4096 x 3072) the pass takes 118 against 19.5 ms in bfloat16 and
    75.0 against 27.6 ms in float32 (`bench/gelu_bfloat16.py [--dtype=float32]`); bert_base's
    float32 pre-training step went 3.70-3.79 -> 3.91-3.99 seq/s (AMX Xeon, 2 vCPU, alternating
    runs).

    Example:
        >>> fused_gelu(tf.constant([1.0], tf.bfloat16))  # GELU(1) = 0.8413: 0.8398 in bfloat16
    """
    return _fused_gelu_forward(x), lambda upstream: _fused_gelu_backward(x, upstream)


def unfused_activation(name, compute_dtype):
    """The activation a layer applies as its own op after the matmul (in training, and in
    bfloat16 inference on AMX, see `BertTransformerBlock`): `fused_gelu` for the exact GELU in
    bfloat16 or float32, else `get_activation(name)`. Elsewhere inference keeps
    `get_activation(name)`, which grappler fuses into the matmul; exports trace under
    `portable_graphs()`, so their serving graphs hold no XLA-compiled function."""
    if name == "gelu" and compute_dtype in ("bfloat16", "float32"):
        return fused_gelu
    return get_activation(name)
