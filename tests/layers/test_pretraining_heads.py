import math

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.layers.masked_lm_head import MaskedLMHead
from bert_tf.layers.next_sentence_head import NextSentenceHead
from tests.harness import check_layer


def numpy_masked_lm(sequence_output, positions, table, kernel, bias, gamma, beta, output_bias,
                    eps):
    """Google's get_masked_lm_output in NumPy: gather, dense + gelu, LayerNorm, tied decoder."""
    gathered = np.stack([sequence_output[b][positions[b]] for b in range(len(positions))])
    hidden = gathered @ kernel + bias
    hidden = 0.5 * hidden * (1.0 + np.vectorize(math.erf)(hidden / math.sqrt(2.0)))
    mean = hidden.mean(-1, keepdims=True)
    variance = ((hidden - mean) ** 2).mean(-1, keepdims=True)
    hidden = (hidden - mean) / np.sqrt(variance + eps) * gamma + beta
    return hidden @ table.T + output_bias


def test_masked_lm_head_layer():
    check_layer(MaskedLMHead, dict(vocab_size=11, hidden_size=8),
                call_args=(tf.random.normal([2, 5, 8]), tf.constant([[1, 3, 0], [4, 0, 0]]),
                           tf.random.normal([11, 8])),
                expected_shape=(2, 3, 11))


def test_next_sentence_head_layer():
    check_layer(NextSentenceHead, dict(hidden_size=8), call_args=(tf.random.normal([3, 8]),),
                expected_shape=(3, 2))


def test_masked_lm_head_matches_googles_computation():
    rng = np.random.default_rng(0)
    head = MaskedLMHead(vocab_size=13, hidden_size=6, layer_norm_eps=1e-12)
    head.build()
    for weight in head.weights:  # random LayerNorm and bias too, so every term is checked
        weight.assign(rng.normal(0, 0.5, weight.shape).astype(np.float32))
    sequence_output = rng.normal(size=(2, 7, 6)).astype(np.float32)
    positions = np.array([[6, 0, 2], [1, 1, 5]], np.int32)
    table = rng.normal(size=(13, 6)).astype(np.float32)
    expected = numpy_masked_lm(
        sequence_output, positions, table, head.transform.kernel.numpy(),
        head.transform.bias.numpy(), head.transform_layer_norm.gamma.numpy(),
        head.transform_layer_norm.beta.numpy(), head.output_bias.numpy(), 1e-12)
    actual = head(tf.constant(sequence_output), tf.constant(positions), tf.constant(table))
    np.testing.assert_allclose(actual, expected, atol=1e-5)


def test_masked_lm_head_decodes_with_the_given_table_and_computes_in_float32():
    head = MaskedLMHead(vocab_size=5, hidden_size=4, dtype="mixed_bfloat16")
    sequence_output = tf.random.normal([1, 3, 4])
    positions = tf.constant([[2]])
    table = tf.random.normal([5, 4])
    logits = head(tf.cast(sequence_output, tf.bfloat16), positions, tf.cast(table, tf.bfloat16))
    assert logits.dtype == tf.float32 and head.compute_dtype == "float32"
    # Logits are linear in the table: doubling it (bias 0 at init) doubles them.
    np.testing.assert_allclose(head(sequence_output, positions, 2.0 * table),
                               2.0 * head(sequence_output, positions, table), rtol=1e-5)


def test_next_sentence_head_keeps_googles_layout():
    head = NextSentenceHead(hidden_size=4)
    head.build()
    assert tuple(head.output_weights.shape) == (2, 4)  # cls/seq_relationship/output_weights
    weights = np.arange(8, dtype=np.float32).reshape(2, 4)
    head.output_weights.assign(weights)
    head.output_bias.assign([0.5, -0.5])
    pooled = np.array([[1.0, 0.0, -1.0, 2.0]], np.float32)
    np.testing.assert_allclose(head(tf.constant(pooled)), pooled @ weights.T + [0.5, -0.5])


def test_unknown_activation_is_named():
    with pytest.raises(ValueError, match="Unknown activation 'gelu2'"):
        MaskedLMHead(vocab_size=5, hidden_size=4, activation="gelu2")


def test_masked_lm_decoder_matmul_runs_in_decoder_dtype_and_logits_stay_float32():
    rng = np.random.default_rng(1)
    sequence_output = tf.constant(rng.normal(size=(2, 9, 16)), tf.float32)
    positions = tf.constant([[1, 4, 8], [0, 2, 3]])
    table = tf.constant(rng.normal(0, 0.5, size=(50, 16)), tf.float32)
    heads = {dtype: MaskedLMHead(vocab_size=50, hidden_size=16, decoder_dtype=dtype)
             for dtype in ("float32", "bfloat16")}
    heads["bfloat16"].build()
    heads["float32"].build()
    heads["bfloat16"].set_weights(heads["float32"].get_weights())
    logits = {dtype: head(sequence_output, positions, table) for dtype, head in heads.items()}
    assert logits["bfloat16"].dtype == tf.float32
    # bfloat16 keeps 8 bits of mantissa: the logits agree to its rounding, not to float32's.
    np.testing.assert_allclose(logits["bfloat16"], logits["float32"], rtol=0.05, atol=0.05)
    assert not np.array_equal(logits["bfloat16"], logits["float32"])
    graph = tf.function(heads["bfloat16"]).get_concrete_function(
        sequence_output, positions, table).graph
    matmul_dtypes = [op.get_attr("T") for op in graph.get_operations() if op.type == "MatMul"]
    assert tf.bfloat16 in matmul_dtypes  # the decoder; the transform stays float32
    assert heads["bfloat16"].get_config()["decoder_dtype"] == "bfloat16"
