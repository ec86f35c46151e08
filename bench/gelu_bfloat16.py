"""The exact GELU's forward + backward pass on one bert_base FFN activation, in bfloat16 (or
`--dtype=float32`): TensorFlow's ops (`tf.nn.gelu`) against
`bert_tf.layers.activations.fused_gelu` (one XLA loop each way, float32 inside; what training
runs in either dtype).

Before the fusion, the bfloat16 bert_base profile (docs/PERFORMANCE.md) spent ~1.2 s of op time
per step in the GELU; the float32 one ~1.1 s.

Example:
    .venv/bin/python bench/gelu_bfloat16.py
    .venv/bin/python bench/gelu_bfloat16.py --dtype=float32
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402
from absl import app, flags  # noqa: E402

from bert_tf.layers.activations import fused_gelu  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_integer("rows", 32 * 128, "Tokens (batch x seq).")
flags.DEFINE_integer("width", 3072, "bert_base's intermediate size.")
flags.DEFINE_enum("dtype", "bfloat16", ["bfloat16", "float32"], "The activation's dtype.")
flags.DEFINE_integer("repeats", 20, "Timed passes per round; the best of 2 rounds is kept.")


def tensorflow_gelu(x):
    return tf.nn.gelu(x, approximate=False)


def forward_backward(gelu):
    @tf.function
    def run(x, upstream):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = gelu(x)
        return y, tape.gradient(y, x, upstream)
    return run


def best_ms(run, x, upstream):
    run(x, upstream)  # trace and compile
    best = float("inf")
    for _ in range(2):
        start = time.perf_counter()
        for _ in range(FLAGS.repeats):
            _, gradient = run(x, upstream)
            gradient.numpy()
        best = min(best, (time.perf_counter() - start) / FLAGS.repeats * 1000)
    return best


def main(argv):
    del argv
    x = tf.random.normal([FLAGS.rows, FLAGS.width], dtype=FLAGS.dtype)
    upstream = tf.random.normal([FLAGS.rows, FLAGS.width], dtype=FLAGS.dtype)
    runs = {"tensorflow": forward_backward(tensorflow_gelu), "xla": forward_backward(fused_gelu)}
    (y_tf, g_tf), (y_xla, g_xla) = (run(x, upstream) for run in runs.values())
    times = {name: best_ms(run, x, upstream) for name, run in runs.items()}
    print(f"GELU forward + backward, {FLAGS.dtype} [{FLAGS.rows}, {FLAGS.width}]:")
    for name, ms in times.items():
        print(f"  {name:10s} {ms:7.1f} ms")
    print(f"  ratio      {times['tensorflow'] / times['xla']:7.2f}x")
    print(f"  largest difference: outputs "
          f"{float(tf.reduce_max(tf.abs(tf.cast(y_tf - y_xla, tf.float32)))):.2g}, gradients "
          f"{float(tf.reduce_max(tf.abs(tf.cast(g_tf - g_xla, tf.float32)))):.2g}")


if __name__ == "__main__":
    app.run(main)
