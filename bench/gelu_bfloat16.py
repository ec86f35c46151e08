"""The exact GELU's forward + backward pass on one bert_base FFN activation in bfloat16:
TensorFlow's ops (what `bert_tf.layers.activations` runs today) against the same maths as two
XLA-compiled loops (float32 inside) joined by a hand-written gradient.

The bfloat16 bert_base profile (docs/PERFORMANCE.md) spends ~1.2 s of op time per step in GELU;
this measures what fusing it could save before anyone wires it into the layers.

Example:
    /work/venv/bin/python bench/gelu_bfloat16.py
"""

import math
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402
from absl import app, flags  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_integer("rows", 32 * 128, "Tokens (batch x seq).")
flags.DEFINE_integer("width", 3072, "bert_base's intermediate size.")
flags.DEFINE_integer("repeats", 20, "Timed passes per round; the best of 2 rounds is kept.")


@tf.function(jit_compile=True)
def _fused_forward(x):
    x32 = tf.cast(x, tf.float32)
    return tf.cast(0.5 * x32 * (1.0 + tf.math.erf(x32 / math.sqrt(2.0))), x.dtype)


@tf.function(jit_compile=True)
def _fused_backward(x, upstream):
    x32 = tf.cast(x, tf.float32)
    cdf = 0.5 * (1.0 + tf.math.erf(x32 / math.sqrt(2.0)))
    pdf = tf.exp(-0.5 * x32 * x32) / math.sqrt(2.0 * math.pi)
    return tf.cast(tf.cast(upstream, tf.float32) * (cdf + x32 * pdf), x.dtype)


@tf.custom_gradient
def fused_gelu(x):
    return _fused_forward(x), lambda upstream: _fused_backward(x, upstream)


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
    x = tf.random.normal([FLAGS.rows, FLAGS.width], dtype=tf.bfloat16)
    upstream = tf.random.normal([FLAGS.rows, FLAGS.width], dtype=tf.bfloat16)
    runs = {"tensorflow": forward_backward(tensorflow_gelu), "xla": forward_backward(fused_gelu)}
    (y_tf, g_tf), (y_xla, g_xla) = (run(x, upstream) for run in runs.values())
    times = {name: best_ms(run, x, upstream) for name, run in runs.items()}
    print(f"GELU forward + backward, bfloat16 [{FLAGS.rows}, {FLAGS.width}]:")
    for name, ms in times.items():
        print(f"  {name:10s} {ms:7.1f} ms")
    print(f"  ratio      {times['tensorflow'] / times['xla']:7.2f}x")
    print(f"  largest difference: outputs "
          f"{float(tf.reduce_max(tf.abs(tf.cast(y_tf - y_xla, tf.float32)))):.4f}, gradients "
          f"{float(tf.reduce_max(tf.abs(tf.cast(g_tf - g_xla, tf.float32)))):.4f} (bfloat16 "
          f"has 8 bits of mantissa)")


if __name__ == "__main__":
    app.run(main)
