import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.layers.dropout import (BertDropout, dropout_with_16_bit_draws,
                                    dropout_with_hashed_bits)

DROPOUTS = [dropout_with_16_bit_draws, dropout_with_hashed_bits]


@pytest.mark.parametrize("dropout", DROPOUTS)
@pytest.mark.parametrize("rate", [0.1, 0.5])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_drops_the_rate_and_keeps_the_expectation(dropout, rate, dtype):
    x = tf.ones([64, 128, 96], dtype)  # 786,432 elements: the dropped share's std is < 6e-4
    y = dropout(x, rate, tf.constant([3, 7]))
    values = tf.cast(y, tf.float32).numpy()
    dropped = np.mean(values == 0)
    assert abs(dropped - rate) < 3e-3, dropped
    kept = values[values != 0]
    np.testing.assert_allclose(kept, 1 / (1 - rate), rtol=1e-2 if dtype == "bfloat16" else 1e-5)
    assert abs(values.mean() - 1) < 1e-2


def test_draws_are_independent_across_halves_and_odd_sizes():
    # Both 16-bit halves of each draw are used: the first and second half of the elements must
    # not share their mask, and an odd size must work.
    x = tf.ones([100_001])
    kept = dropout_with_16_bit_draws(x, 0.5, tf.constant([1, 2])).numpy() != 0
    first, second = kept[:50_000], kept[50_001:100_001]
    assert 0.48 < kept.mean() < 0.52
    assert abs(np.mean(first == second) - 0.5) < 0.02  # independent masks agree half the time


@pytest.mark.parametrize("dropout", DROPOUTS)
def test_same_seed_same_mask_other_seed_other_mask(dropout):
    x = tf.random.normal([32, 16, 24])
    a = dropout(x, 0.1, tf.constant([5, 0]))
    b = dropout(x, 0.1, tf.constant([5, 0]))
    c = dropout(x, 0.1, tf.constant([5, 1]))
    np.testing.assert_array_equal(a, b)
    assert np.any((a.numpy() == 0) != (c.numpy() == 0))


def test_layer_is_identity_in_inference_and_advances_its_seed_in_training():
    layer = BertDropout(0.1, seed=42)
    x = tf.ones([8, 64])
    np.testing.assert_array_equal(layer(x, training=False), x)
    first, second = layer(x, training=True), layer(x, training=True)
    assert np.any(first.numpy() != second.numpy())  # a new mask per call, like Keras' Dropout


def test_keeps_the_seed_variable_of_keras_dropout():
    # Training checkpoints list the dropout layers' seed states in model order
    # (`training_checkpoint(dropout_rng=...)`): one state variable per layer, as with Keras'.
    layer, keras_dropout = BertDropout(0.1, seed=1), keras.layers.Dropout(0.1, seed=1)
    assert [(v.name, v.shape, v.dtype) for v in layer.variables] == [
        (v.name, v.shape, v.dtype) for v in keras_dropout.variables]


@pytest.mark.parametrize("dropout", DROPOUTS)
def test_gradient_is_the_mask_times_the_scale(dropout):
    x = tf.random.normal([16, 40])
    seed = tf.constant([9, 9])
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = dropout(x, 0.25, seed)
    gradient = tape.gradient(y, x).numpy()
    expected = np.where(y.numpy() != 0, 1 / 0.75, 0)
    np.testing.assert_allclose(gradient, expected, rtol=1e-6)


@pytest.mark.parametrize("dropout", DROPOUTS)
def test_rates_zero_and_one_and_noise_shape(dropout):
    x = tf.random.normal([4, 5])
    np.testing.assert_array_equal(dropout(x, 0.0, tf.constant([1, 1])), x)
    np.testing.assert_array_equal(dropout(x, 1.0, tf.constant([1, 1])), tf.zeros_like(x))
    with pytest.raises(ValueError, match="noise_shape"):
        BertDropout(0.1, noise_shape=(None, 1))


@pytest.mark.parametrize("dropout", DROPOUTS)
def test_runs_under_xla(dropout):
    x = tf.ones([32, 33])
    compiled = tf.function(lambda x: dropout(x, 0.1, tf.constant([2, 3])), jit_compile=True)
    np.testing.assert_array_equal(compiled(x), dropout(x, 0.1, tf.constant([2, 3])))


def test_hashed_masks_of_neighbouring_seeds_and_positions_are_independent():
    # The layer's seeds advance by one per call ([s, c], [s, c + 1]); a mask must not repeat,
    # shifted or not, in the next call, nor correlate between neighbouring elements.
    x = tf.ones([256, 1024])
    masks = [dropout_with_hashed_bits(x, 0.5, tf.constant(seed)).numpy().ravel() != 0
             for seed in ([7, 0], [7, 1], [8, 0])]
    for other in masks[1:]:
        assert abs(np.mean(masks[0] == other) - 0.5) < 0.005   # std 0.001
    for shift in (1, 2, 1024):
        assert abs(np.mean(masks[0][shift:] == masks[0][:-shift]) - 0.5) < 0.005
    # 16-bit buckets: the low rate 0.1 is hit per row, not only overall.
    per_row = 1 - (dropout_with_hashed_bits(x, 0.1, tf.constant([1, 2])).numpy() != 0).mean(1)
    assert abs(per_row.mean() - 0.1) < 3e-3 and per_row.std() < 0.02


def test_layer_hashes_fixed_shapes_and_draws_for_unknown_ones():
    layer = BertDropout(0.5, seed=3)
    x = tf.ones([8, 64])
    seed = layer.seed_generator.state.numpy().copy()
    eager = layer(x, training=True).numpy()
    layer.seed_generator.state.assign(seed)
    unknown = tf.function(lambda x: layer(x, training=True),
                          input_signature=[tf.TensorSpec([None, 64])])(x).numpy()
    layer_seed = tf.cast(tf.math.floormod(seed, tf.int32.max - 1), tf.int32)
    np.testing.assert_array_equal(eager, dropout_with_hashed_bits(x, 0.5, layer_seed))
    np.testing.assert_array_equal(unknown, dropout_with_16_bit_draws(x, 0.5, layer_seed))
