import numpy as np
import tensorflow as tf

from bert_tf.data.without_autotuning import without_autotuning


def test_the_same_elements_without_autotuning_and_other_options_kept():
    options = tf.data.Options()
    options.deterministic = False
    dataset = (tf.data.Dataset.range(20).map(lambda x: x * 2, num_parallel_calls=tf.data.AUTOTUNE)
               .batch(4).prefetch(tf.data.AUTOTUNE).with_options(options))
    assert dataset.options().autotune.enabled is None  # TensorFlow's default: on

    untuned = without_autotuning(dataset)

    assert untuned.options().autotune.enabled is False
    assert untuned.options().deterministic is False
    np.testing.assert_array_equal(np.sort(np.concatenate(list(untuned.as_numpy_iterator()))),
                                  np.arange(0, 40, 2))
