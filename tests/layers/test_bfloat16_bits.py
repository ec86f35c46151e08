import numpy as np
import pytest
import tensorflow as tf

from bert_tf.layers.bfloat16_bits import narrow, widen


def _bits(x):
    return tf.bitcast(x, tf.uint16).numpy()


@pytest.mark.parametrize("jit_compile", [False, True])
def test_widen_is_exact_for_every_bfloat16(jit_compile):
    every = tf.bitcast(tf.constant(np.arange(1 << 16, dtype=np.uint16)), tf.bfloat16)
    widened = tf.function(widen, jit_compile=jit_compile)(every)
    reference = tf.cast(every, tf.float32).numpy()
    nan = np.isnan(reference)
    assert widened.dtype == tf.float32
    np.testing.assert_array_equal(np.isnan(widened.numpy()), nan)
    np.testing.assert_array_equal(widened.numpy()[~nan], reference[~nan])


@pytest.mark.parametrize("jit_compile", [False, True])
def test_narrow_rounds_as_tf_cast(jit_compile):
    rng = np.random.default_rng(0)
    random_bits = rng.integers(0, 1 << 32, 200_000, dtype=np.uint64).astype(np.uint32)
    # Ties (the dropped half exactly 0x8000) with even and odd kept halves, the largest finite
    # values (they round to infinity), subnormals, zeros, infinities.
    ties = (rng.integers(0, 1 << 16, 1000).astype(np.uint32) << 16) | 0x8000
    special = np.array([0x7F7FFFFF, 0xFF7FFFFF, 0x7F7F7FFF, 0x00000001, 0x807FFFFF, 0, 0x80000000,
                        0x7F800000, 0xFF800000], np.uint32)
    values = np.concatenate([random_bits, ties, special]).view(np.float32)
    values = values[~np.isnan(values)]
    narrowed = tf.function(lambda x: narrow(x, tf.bfloat16), jit_compile=jit_compile)(values)
    assert narrowed.dtype == tf.bfloat16
    np.testing.assert_array_equal(_bits(narrowed), _bits(tf.cast(values, tf.bfloat16)))


def test_a_nan_stays_a_nan():
    # NaNs whose payload sits in the low half: adding the rounding bias would make them inf.
    nans = np.array([0x7F800001, 0xFF800001, 0x7FC00000, 0x7F80FFFF], np.uint32).view(np.float32)
    assert np.isnan(tf.cast(narrow(nans, tf.bfloat16), tf.float32).numpy()).all()


def test_other_dtypes_are_plain_casts():
    x = tf.constant([1.5, -2.25], tf.float32)
    assert widen(x).dtype == tf.float32
    assert narrow(x, tf.float16).dtype == tf.float16
    np.testing.assert_array_equal(narrow(x, tf.float16).numpy(), [1.5, -2.25])
