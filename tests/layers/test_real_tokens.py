"""Under `real_tokens_only()` the encoder's inference runs its dense layers on the real tokens'
rows: the real tokens' outputs and the pooled output equal the padded computation's, padding
positions output 0, and training ignores the scope."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.config import BertConfig
from bert_tf.layers.portable_graphs import portable_graphs
from bert_tf.layers.real_tokens import RealTokens, real_tokens_only
from bert_tf.models.bert_encoder import BertEncoder

MASK = np.array([[1] * 7 + [0] * 3,     # padded
                 [1] * 10,              # full
                 [1, 1] + [0] * 8],     # [CLS] [SEP] only
                np.int32)


def encoder_inputs(seed=0):
    ids = np.random.default_rng(seed).integers(1, 100, MASK.shape).astype(np.int32) * MASK
    return {"input_word_ids": tf.constant(ids), "input_mask": tf.constant(MASK),
            "input_type_ids": tf.constant((np.arange(10) >= 4).astype(np.int32) * MASK)}


def test_gather_and_scatter_move_rows_between_layouts():
    tokens = RealTokens(tf.constant(MASK))
    padded = tf.reshape(tf.range(3 * 10 * 2, dtype=tf.float32), [3, 10, 2])
    rows = tokens.gather(padded)
    assert rows.shape == (MASK.sum(), 2)
    np.testing.assert_array_equal(rows, padded.numpy()[MASK == 1])   # batch-major order
    back = tokens.scatter(rows).numpy()
    np.testing.assert_array_equal(back[MASK == 1], padded.numpy()[MASK == 1])
    assert (back[MASK == 0] == 0).all()


def test_heads_moves_equal_scatter_and_gather_with_the_heads_transposed():
    tokens = RealTokens(tf.constant(MASK))
    heads, size = 3, 2
    rows = tf.reshape(tf.range(MASK.sum() * heads * size, dtype=tf.float32), [-1, heads * size])
    by_head = tokens.scatter_heads(rows, heads).numpy()
    padded = tokens.scatter(rows).numpy().reshape(3, 10, heads, size).transpose(0, 2, 1, 3)
    np.testing.assert_array_equal(by_head, padded)   # 0 at padding, each head's slice in place
    back = tokens.gather_heads(tf.constant(by_head * 2))
    np.testing.assert_array_equal(back, rows.numpy() * 2)
    no_tokens = RealTokens(tf.zeros([2, 4], tf.int32))
    empty = no_tokens.scatter_heads(tf.zeros([0, heads * size]), heads)
    np.testing.assert_array_equal(empty, np.zeros([2, heads, 4, size]))
    assert no_tokens.gather_heads(empty).shape == (0, heads * size)


@pytest.mark.parametrize("dtype", ["float32", "mixed_bfloat16"])
def test_inference_on_real_tokens_equals_the_padded_computation(dtype):
    # Seeded: under mixed_bfloat16 some random weights put a matmul output on the edge of a
    # bfloat16 rounding, which the two computations (30 rows, 20 rows) then round apart: one
    # draw in three moved a LayerNorm output by up to 2.4e-4 (1e-7 to 1e-6 otherwise).
    keras.utils.set_random_seed(0)
    encoder = BertEncoder(BertConfig.from_name("bert_tiny"), dtype=dtype)
    inputs = encoder_inputs()

    @tf.function
    def real_tokens_outputs(inputs):
        with real_tokens_only():
            return encoder(inputs, training=False)

    @tf.function
    def pooled_only(inputs):  # the classifier's fetch: the last layer's first-token query
        with real_tokens_only():
            return encoder(inputs, training=False)["pooled_output"]

    # Both traced: eager and traced bfloat16 differ by their rounding (grappler fuses the bias
    # into the matmul in a graph). The padded one in portable graphs: on a CPU with AMX, bfloat16
    # inference otherwise runs the GELU apart from its matmul, which real-token rows do not (a
    # bfloat16 rounding apart; see `BertTransformerBlock._activation_in_matmul`).
    with portable_graphs():
        padded = tf.function(lambda inputs: encoder(inputs, training=False))(inputs)
    real = real_tokens_outputs(inputs)
    is_token = MASK == 1
    for name in ("sequence_output", "pooled_output"):
        assert real[name].dtype == tf.float32
    for layer_output, expected in zip(real["encoder_outputs"], padded["encoder_outputs"]):
        np.testing.assert_allclose(layer_output.numpy()[is_token],
                                   expected.numpy()[is_token], atol=1e-5)
        assert (layer_output.numpy()[~is_token] == 0).all()
    np.testing.assert_allclose(real["pooled_output"], padded["pooled_output"], atol=1e-5)
    np.testing.assert_allclose(pooled_only(inputs), padded["pooled_output"], atol=1e-5)


def test_training_ignores_the_scope():
    config = BertConfig.from_dict({**BertConfig.from_name("bert_tiny").to_dict(),
                                   "hidden_dropout_prob": 0.0,
                                   "attention_probs_dropout_prob": 0.0})
    encoder = BertEncoder(config)
    inputs = encoder_inputs(seed=1)
    with real_tokens_only():
        trained = encoder(inputs, training=True)["sequence_output"].numpy()
    expected = encoder(inputs, training=False)["sequence_output"].numpy()
    np.testing.assert_allclose(trained, expected, atol=1e-5)
    assert (trained[MASK == 0] != 0).all()   # padding positions computed as BERT does
