import gc
import weakref

import keras
import numpy as np
import tensorflow as tf

from bert_tf.layers.compute_weights import compute_weight, weight_casts


def test_casts_of_weights_to_16_bits_are_recorded_per_graph():
    kernel = tf.Variable(np.arange(6, dtype=np.float32).reshape(2, 3))

    @tf.function
    def forward():
        return compute_weight(kernel, tf.bfloat16), compute_weight(kernel, tf.float32)

    graph = forward.get_concrete_function().graph
    casts = weight_casts(graph)
    assert [op.type for op in casts] == ["Cast"]  # the float32 "cast" is no cast
    assert casts[0].outputs[0].dtype == tf.bfloat16
    assert weight_casts() == []  # nothing traced in the eager context's graph
    np.testing.assert_array_equal(forward()[0].numpy(), kernel.numpy())


def test_a_keras_layers_autocast_weight_is_recorded():
    # Under mixed precision Keras casts the variable on reading it inside `call`: that is the
    # cast to wait for.
    layer = keras.layers.Dense(3, dtype="mixed_bfloat16")
    layer.build((None, 2))

    class Probe(keras.layers.Layer):
        def call(self, inputs):
            return tf.matmul(inputs, compute_weight(layer.kernel, layer.compute_dtype))

    probe = Probe(dtype="mixed_bfloat16")
    forward = tf.function(lambda x: probe(x))
    graph = forward.get_concrete_function(tf.TensorSpec([1, 2], tf.float32)).graph
    assert len(weight_casts(graph)) == 1


def test_eager_casts_are_not_recorded_and_records_do_not_keep_their_graph():
    kernel = tf.Variable(tf.ones([2, 2]))
    assert compute_weight(kernel, tf.bfloat16).dtype == tf.bfloat16  # eager: nothing kept

    forward = tf.function(lambda: compute_weight(kernel, tf.bfloat16))
    graph = forward.get_concrete_function().graph
    assert len(weight_casts(graph)) == 1
    graph_alive = weakref.ref(graph)
    del forward, graph
    gc.collect()
    assert graph_alive() is None
