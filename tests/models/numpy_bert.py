"""A plain NumPy forward pass of BERT, written from the paper and Google's modeling.py,
used as an independent reference for `BertEncoder` (no Keras, no TensorFlow).

Example:
    >>> outputs = numpy_bert_forward(numpy_weights(encoder), config, ids, mask, type_ids)
"""

import math

import numpy as np


def numpy_weights(encoder):
    """The encoder's weights as a dict keyed by Keras weight path."""
    return {w.path: np.asarray(w) for w in encoder.weights}


def _layer_norm(x, gamma, beta, eps):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def _gelu(x):
    return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


def numpy_bert_forward(w, config, ids, mask, type_ids):
    ids, mask, type_ids = (np.asarray(a, np.int64) for a in (ids, mask, type_ids))
    batch, seq = ids.shape
    eps, heads = config.layer_norm_eps, config.num_attention_heads
    size = config.hidden_size // heads
    x = (w["embeddings/word_embeddings"][ids] + w["embeddings/token_type_embeddings"][type_ids]
         + w["embeddings/position_embeddings"][:seq][None])
    x = _layer_norm(x, w["embeddings/layer_norm/gamma"], w["embeddings/layer_norm/beta"], eps)
    additive = (1.0 - mask[:, None, None, :]) * -10000.0
    layers = []
    for i in range(config.num_hidden_layers):
        p = f"layer_{i}/"

        def dense(v, name):
            return v @ w[p + name + "/kernel"] + w[p + name + "/bias"]

        def split(v):
            return v.reshape(batch, seq, heads, size).transpose(0, 2, 1, 3)

        q, k, v = (split(dense(x, "attention/" + n)) for n in ("query", "key", "value"))
        scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(size) + additive
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, seq, -1)
        h = _layer_norm(x + dense(context, "attention_output"),
                        w[p + "attention_layer_norm/gamma"], w[p + "attention_layer_norm/beta"], eps)
        ffn = dense(_gelu(dense(h, "intermediate")), "output_dense")
        x = _layer_norm(h + ffn, w[p + "output_layer_norm/gamma"], w[p + "output_layer_norm/beta"], eps)
        layers.append(x)
    pooled = np.tanh(x[:, 0] @ w["pooler/kernel"] + w["pooler/bias"])
    return {"sequence_output": x, "pooled_output": pooled, "encoder_outputs": layers}
