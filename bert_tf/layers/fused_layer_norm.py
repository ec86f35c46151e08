"""`residual_layer_norm`: LayerNorm of a residual sum, the branch's dropout included, as one XLA
loop forward and one backward.

For bfloat16 training on CPU, like `fused_gelu`: each of BERT's post-LN sums (`residual +
branch`, then LayerNorm) is, as TensorFlow ops, a cast, an add, two means, a subtraction, a
rsqrt and two multiply-adds forward, and about twice as many ops backward, each a pass over the
activations. Here the forward is one loop and the backward one loop plus the two column sums.
Measured on a 2-vCPU AMD EPYC (avx512_bf16, no AMX), TF 2.21, forward + backward of one call
(Keras `LayerNormalization` on `residual + cast(branch)` against this, best of 3 x 30):
`[4096, 256]` 4.3 -> 3.5 ms, `[4096, 768]` 15.6 -> 12.3 ms, `[470, 384]` 1.4 -> 1.1 ms; the
bert_mini pre-training step in bfloat16 (8 such calls) ran 3-7 % faster in five alternating
pairs of runs (`bench/pretraining_throughput.py`, docs/PERFORMANCE.md). The branch's dropout
mask is hashed inside the same loops (`hashed_dropout`), for any shape: its random draws, bit
masks and select were another ~10 ops a call; see `BertTransformerBlock._drop_add_and_norm`
for what that did to fine-tuning.

Float32 throughout, with the same formula as Keras' layer (the variance is the mean squared
deviation, `epsilon` inside the square root): outputs agree to float32 round-off.

Example:
    >>> norm = keras.layers.LayerNormalization(epsilon=1e-12)
    >>> norm.build((None, 8))
    >>> y = residual_layer_norm(tf.ones([2, 8]), tf.zeros([2, 8], tf.bfloat16), norm)
"""

import tensorflow as tf

from bert_tf.layers.dropout import dropout_threshold, hashed_dropout
from bert_tf.xla_host import host_jit_compile


@tf.function(jit_compile=host_jit_compile(), autograph=False)
def _forward(residual, branch, gamma, beta, epsilon, threshold, seed):
    x = residual + tf.cast(hashed_dropout(branch, threshold, seed), tf.float32)
    centered = x - tf.reduce_mean(x, axis=-1, keepdims=True)
    inverse_std = tf.math.rsqrt(
        tf.reduce_mean(tf.square(centered), axis=-1, keepdims=True) + epsilon)
    normalized = centered * inverse_std
    return normalized * gamma + beta, normalized, inverse_std


@tf.function(jit_compile=host_jit_compile(), autograph=False)
def _backward(upstream, normalized, inverse_std, gamma, branch_dtype, threshold, seed):
    scaled = upstream * gamma
    residual_grad = inverse_std * (
        scaled - tf.reduce_mean(scaled, axis=-1, keepdims=True)
        - normalized * tf.reduce_mean(scaled * normalized, axis=-1, keepdims=True))
    positions = list(range(upstream.shape.rank - 1))  # every axis but the hidden one
    branch_grad = hashed_dropout(tf.cast(residual_grad, branch_dtype), threshold, seed)
    return (residual_grad, branch_grad,
            tf.reduce_sum(upstream * normalized, axis=positions),
            tf.reduce_sum(upstream, axis=positions))


def residual_layer_norm(residual, branch, layer_norm, dropout_rate=0.0, dropout_seed=None):
    """`layer_norm(residual + cast(dropout(branch), float32))` (float32 `[..., hidden]`), with
    `layer_norm` a built Keras `LayerNormalization` over the last axis whose `gamma` and `beta`
    are used (and receive the gradients), and `dropout` `dropout_with_hashed_bits(branch,
    dropout_rate, dropout_seed)`, computed inside the same loops (the backward recomputes the
    mask)."""
    threshold = dropout_threshold(dropout_rate)
    if dropout_seed is None:
        dropout_seed = tf.zeros([2], tf.int32)  # unused: rate 0 keeps every element

    @tf.custom_gradient
    def fused(residual, branch, gamma, beta):
        output, normalized, inverse_std = _forward(residual, branch, gamma, beta,
                                                   float(layer_norm.epsilon), threshold,
                                                   dropout_seed)

        def grad(upstream):
            return _backward(upstream, normalized, inverse_std, gamma, branch.dtype,
                             threshold, dropout_seed)

        return output, grad

    # Read outside: a custom gradient over tensors (a variable read inside would need one
    # over variables); the reads pass the gradients on to the variables.
    return fused(residual, branch, tf.convert_to_tensor(layer_norm.gamma),
                 tf.convert_to_tensor(layer_norm.beta))
