"""A bfloat16 dense layer's bias gradient, the column sums of its output gradient: TensorFlow's
`BiasAddGrad` (BiasAdd's own gradient, what Keras' MatMul + BiasAdd trains with) against
`tf.reduce_sum` (what `bert_tf.layers.dense_rows` writes out), in time per call and in distance
from the float32 column sums of the same bfloat16 values.

Example:
    .venv/bin/python bench/bias_gradient_bfloat16.py
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench/ helpers
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from absl import app, flags  # noqa: E402

from benchmarking import cpu_description  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_integer("rows", 32 * 16, "Tokens (batch x seq): a fine-tuning batch of SST-2.")
flags.DEFINE_integer("width", 1536, "MiniLM's intermediate size.")
flags.DEFINE_integer("calls", 500, "Timed calls; the median is reported.")


def median_us(column_sums, upstream):
    column_sums(upstream)  # trace
    times = []
    for _ in range(FLAGS.calls):
        start = time.perf_counter()
        column_sums(upstream).numpy()
        times.append(time.perf_counter() - start)
    return 1e6 * np.median(times)


def main(argv):
    del argv
    upstream = tf.cast(tf.random.normal([FLAGS.rows, FLAGS.width], seed=0), tf.bfloat16)
    exact = tf.reduce_sum(tf.cast(upstream, tf.float32), axis=0)
    sums = {"BiasAddGrad": tf.function(lambda u: tf.raw_ops.BiasAddGrad(out_backprop=u)),
            "reduce_sum": tf.function(lambda u: tf.reduce_sum(u, axis=0))}
    print(f"{cpu_description()}\ncolumn sums of a bfloat16 [{FLAGS.rows}, {FLAGS.width}] of "
          f"standard normals (float32 sums up to {float(tf.reduce_max(tf.abs(exact))):.1f}):")
    for name, column_sums in sums.items():
        error = float(tf.reduce_max(tf.abs(tf.cast(column_sums(upstream), tf.float32) - exact)))
        print(f"  {name:12s} {median_us(column_sums, upstream):6.0f} us per call (median of "
              f"{FLAGS.calls}), largest error against float32 {error:.3f}")


if __name__ == "__main__":
    app.run(main)
