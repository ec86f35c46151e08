"""The feed-forward's matmuls alone, in each form TensorFlow can run them: which is fastest on
this CPU. BERT-base's shapes at batch 32 x 128 by default: `[rows, 768] @ [768, 3072]` (in)
and `[rows, 3072] @ [3072, 768]` (out), each as a 2-D MatMul (bare, with the bias, with the
bias and the exact GELU or the residual: what grappler fuses into one oneDNN matmul, the
encoder's form in float32), as a batched matmul of sequences, and as the AMX form's 4-D
matmul with post-ops (`bert_tf.layers.dense_rows`: bfloat16 on AMX or on few rows); then the whole feed-forward (in, GELU, out, residual)
on the rows at once and on row chunks, whose `[rows / chunks, 3072]` intermediate fits in a
smaller cache. One op runs at a time (one inter-op thread); each form is the best of
--rounds calls, timed in turns.

Example:
    .venv/bin/python bench/feed_forward_forms.py
    .venv/bin/python bench/feed_forward_forms.py --dtype=bfloat16 --rows=128 --chunks=
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench/ helpers

import tensorflow as tf  # noqa: E402
from absl import app, flags  # noqa: E402

from benchmarking import cpu_description, machine_load  # noqa: E402
from bert_tf.layers.dense_rows import _amx_matmul_plus_bias, unfoldable_scalar  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_enum("dtype", "float32", ["float32", "bfloat16"], "The matmuls' dtype.")
flags.DEFINE_integer("rows", 4096, "Rows (batch x sequence length).")
flags.DEFINE_integer("seq_length", 128, "Rows per sequence, for the batched forms.")
flags.DEFINE_integer("hidden", 768, "Hidden size.")
flags.DEFINE_integer("intermediate", 3072, "Feed-forward size.")
flags.DEFINE_list("chunks", ["2", "4", "8", "16"], "Row chunk counts of the whole feed-forward.")
flags.DEFINE_integer("rounds", 10, "Calls of each form; the best is reported.")


def forms(rows, residual, w_in, b_in, w_out, b_out, intermediate, seq_length, chunks):
    """{name: (function, FLOPs)} of every form on the given operands."""
    dtype = rows.dtype
    one = lambda: unfoldable_scalar(1.0, dtype)  # noqa: E731 (built inside each trace)
    sequences = lambda x: tf.reshape(x, [-1, seq_length, x.shape[-1]])  # noqa: E731

    def feed_forward(x, skip):
        hidden = tf.nn.gelu(tf.nn.bias_add(tf.matmul(x, w_in), b_in), approximate=False)
        return tf.nn.bias_add(tf.matmul(hidden, w_out), b_out) + skip

    matmul_flops = 2 * rows.shape[0] * w_in.shape[0] * w_in.shape[1]
    table = {
        "in: 2-D bare": lambda: tf.matmul(rows, w_in),
        "in: 2-D + bias": lambda: tf.nn.bias_add(tf.matmul(rows, w_in), b_in),
        "in: 2-D + bias + GELU": lambda: tf.nn.gelu(
            tf.nn.bias_add(tf.matmul(rows, w_in), b_in), approximate=False),
        "in: batched by sequence, bare": lambda: tf.matmul(sequences(rows), w_in[tf.newaxis]),
        "in: batched by sequence + bias + GELU": lambda: tf.nn.gelu(
            tf.matmul(sequences(rows), w_in[tf.newaxis]) * one() + b_in, approximate=False),
        "in: 4-D, post-ops x 1 + bias (AMX form)": lambda: _amx_matmul_plus_bias(
            rows, w_in, b_in),
        "out: 2-D bare": lambda: tf.matmul(intermediate, w_out),
        "out: 2-D + bias + residual": lambda: tf.nn.bias_add(
            tf.matmul(intermediate, w_out), b_out) + residual,
        "out: batched by sequence, bare": lambda: tf.matmul(sequences(intermediate),
                                                           w_out[tf.newaxis]),
        "out: 4-D, post-ops x 1 + bias (AMX form)": lambda: _amx_matmul_plus_bias(
            intermediate, w_out, b_out),
    }
    result = {name: (function, matmul_flops) for name, function in table.items()}
    result["whole feed-forward on all rows"] = (lambda: feed_forward(rows, residual),
                                                2 * matmul_flops)
    for count in chunks:
        result[f"whole feed-forward in {count} row chunks"] = (
            lambda count=count: tf.concat(
                [feed_forward(x, skip) for x, skip in zip(tf.split(rows, count),
                                                          tf.split(residual, count))], 0),
            2 * matmul_flops)
    return result


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    if FLAGS.rows % FLAGS.seq_length or any(FLAGS.rows % int(c) for c in FLAGS.chunks):
        raise app.UsageError("--rows must be a multiple of --seq_length and of every --chunks")
    tf.config.threading.set_inter_op_parallelism_threads(1)
    dtype = tf.as_dtype(FLAGS.dtype)
    generator = tf.random.Generator.from_seed(0)
    random = lambda *shape: tf.cast(generator.normal(shape), dtype)  # noqa: E731
    h, i = FLAGS.hidden, FLAGS.intermediate
    weights = [tf.Variable(random(h, i) * 0.02), tf.Variable(tf.zeros([i], dtype)),
               tf.Variable(random(i, h) * 0.02), tf.Variable(tf.zeros([h], dtype))]
    rows, residual = random(FLAGS.rows, h), random(FLAGS.rows, h)
    intermediate = random(FLAGS.rows, i)
    table = forms(rows, residual, *weights, intermediate, FLAGS.seq_length,
                  [int(c) for c in FLAGS.chunks])
    compiled = {name: tf.function(function) for name, (function, _) in table.items()}
    for function in compiled.values():
        function().numpy()  # trace, create the oneDNN primitives
    best = dict.fromkeys(compiled, float("inf"))
    for _ in range(FLAGS.rounds):
        for name, function in compiled.items():
            start = time.perf_counter()
            function().numpy()
            best[name] = min(best[name], time.perf_counter() - start)
    print(f"{FLAGS.dtype}, {FLAGS.rows} rows, hidden {h}, intermediate {i}; {cpu_description()}; "
          f"{machine_load()}; best of {FLAGS.rounds}\n")
    print("| form | ms | GFLOP/s |\n|---|---|---|")
    for name, seconds in best.items():
        print(f"| {name} | {seconds * 1e3:.1f} | {table[name][1] / seconds / 1e9:.0f} |")


if __name__ == "__main__":
    app.run(main)
