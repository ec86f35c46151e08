"""Times three ways of projecting attention inputs to heads, in stacks of attention blocks.

- `head_major`: what `BertSelfAttention._project_to_heads` does: the `[hidden, hidden]` kernel
  reordered to `[heads, hidden, head_size]` (a transpose per projection per call) and one
  broadcasting batched matmul that writes `[batch, heads, seq, head_size]` directly;
- `two_d`: a 2-D matmul with the bias fused, then a transpose of the activations;
- `fused_qkv`: query, key and value as one 2-D matmul with a `[hidden, 3 * hidden]` kernel
  concatenated ahead of time (as an export could store it; Google's `[hidden, hidden]` kernels
  stay the checkpoint's layout), split, then transposed like `two_d`.

All feed the same scores, softmax, context and output projection; the script checks they
agree and prints the median milliseconds per call of each, taking turns.

    .venv/bin/python bench/attention_projections.py --batch_size=1 --seq_length=32
    .venv/bin/python bench/attention_projections.py --batch_size=32 --seq_length=128
    .venv/bin/python bench/attention_projections.py --batch_size=1 --seq_length=25 --nohead_major
"""

import time

import numpy as np
import tensorflow as tf
from absl import app, flags

FLAGS = flags.FLAGS
flags.DEFINE_integer("batch_size", 1, "Sequences per call.")
flags.DEFINE_integer("seq_length", 32, "Tokens per sequence.")
flags.DEFINE_integer("hidden_size", 384, "Hidden size (MiniLM: 384).")
flags.DEFINE_integer("num_heads", 12, "Attention heads.")
flags.DEFINE_integer("num_layers", 6, "Attention blocks per call.")
flags.DEFINE_integer("rounds", 10, "Turns of each variant; the median is printed.")
flags.DEFINE_integer("calls_per_round", 50, "Calls per turn.")
flags.DEFINE_boolean("head_major", True, "Also time `head_major` (--nohead_major: `two_d` and "
                     "`fused_qkv` only; `two_d` is the reference either way).")


def head_major(inputs, kernel, bias, heads):
    hidden = kernel.shape[0]
    by_head = tf.transpose(tf.reshape(kernel, [hidden, heads, hidden // heads]), [1, 0, 2])
    return tf.matmul(inputs[:, tf.newaxis], by_head) + tf.reshape(bias, [heads, 1, -1])


def _rows_projection(inputs, kernel, bias):
    """`inputs [batch, seq, hidden] @ kernel + bias` as one 2-D matmul, `[batch * seq, units]`."""
    return tf.nn.bias_add(tf.matmul(tf.reshape(inputs, [-1, inputs.shape[-1]]), kernel), bias)


def _to_heads(rows, batch, seq, heads):
    """Projected `rows [batch * seq, hidden]` moved to `[batch, heads, seq, head_size]`."""
    return tf.transpose(tf.reshape(rows, [batch, seq, heads, -1]), [0, 2, 1, 3])


def two_d(inputs, kernel, bias, heads):
    batch, seq, _ = inputs.shape
    return _to_heads(_rows_projection(inputs, kernel, bias), batch, seq, heads)


def fused_qkv(inputs, kernels, biases, fused, heads):
    """`inputs` projected by `fused`, the query's, key's and value's kernels and biases
    concatenated (`[hidden, 3 * hidden]`, `[3 * hidden]`; the separate `kernels` and `biases`
    unused): `(query, key, value)`, each `[batch, heads, seq, head_size]`."""
    del kernels, biases
    batch, seq, _ = inputs.shape
    return tuple(_to_heads(part, batch, seq, heads)
                 for part in tf.split(_rows_projection(inputs, *fused), 3, axis=1))


def each_projection(project):
    """`project` (one kernel) applied to the query's, key's and value's kernels in turn."""
    def project_all(inputs, kernels, biases, fused, heads):
        del fused
        return tuple(project(inputs, kernels[i], biases[i], heads) for i in range(3))
    return project_all


def attention_stack(project_all, weights, heads):
    """A `tf.function` running `len(weights)` attention blocks with `project_all`."""
    @tf.function
    def forward(hidden_states):
        batch, seq, hidden = hidden_states.shape
        for kernels, biases, fused in weights:
            query, key, value = project_all(hidden_states, kernels, biases, fused, heads)
            probabilities = tf.nn.softmax(tf.matmul(query, key, transpose_b=True))
            context = tf.transpose(tf.matmul(probabilities, value), [0, 2, 1, 3])
            hidden_states = tf.reshape(tf.nn.bias_add(
                tf.matmul(tf.reshape(context, [-1, hidden]), kernels[3]), biases[3]),
                [batch, seq, hidden])
        return hidden_states
    return forward


def main(argv):
    del argv
    rng = np.random.default_rng(0)
    hidden = FLAGS.hidden_size
    scale = 0.5 / np.sqrt(hidden)  # keeps the stack's outputs from growing layer by layer
    weights = []
    for _ in range(FLAGS.num_layers):
        kernels = [rng.normal(0, scale, [hidden, hidden]).astype("float32") for _ in range(4)]
        biases = [rng.normal(0, scale, [hidden]).astype("float32") for _ in range(4)]
        fused = (tf.Variable(np.concatenate(kernels[:3], axis=1)),
                 tf.Variable(np.concatenate(biases[:3])))
        weights.append(([tf.Variable(k) for k in kernels], [tf.Variable(b) for b in biases],
                        fused))
    inputs = tf.constant(rng.normal(size=[FLAGS.batch_size, FLAGS.seq_length, hidden])
                         .astype("float32"))
    forms = {"two_d": each_projection(two_d), "fused_qkv": fused_qkv}
    if FLAGS.head_major:
        forms = {"head_major": each_projection(head_major), **forms}
    variants = {name: attention_stack(project_all, weights, FLAGS.num_heads)
                for name, project_all in forms.items()}
    reference = variants["two_d"](inputs).numpy()
    difference = max(np.abs(reference - forward(inputs).numpy()).max()
                     for forward in variants.values()) / np.abs(reference).max()
    if difference > 1e-5:
        raise SystemExit(f"The projections disagree by {difference:.1e} (relative).")
    times = {name: [] for name in variants}
    for _ in range(FLAGS.rounds):
        for name, forward in variants.items():
            start = time.perf_counter()
            for _ in range(FLAGS.calls_per_round):
                forward(inputs)
            times[name].append((time.perf_counter() - start) / FLAGS.calls_per_round * 1e3)
    print(f"batch {FLAGS.batch_size}, seq {FLAGS.seq_length}, hidden {hidden}, "
          f"{FLAGS.num_heads} heads, {FLAGS.num_layers} blocks, float32; max difference "
          f"{difference:.1e} (relative); median ms per call: "
          + ", ".join(f"{name} {np.median(ms):.2f}" for name, ms in times.items()))


if __name__ == "__main__":
    app.run(main)
