"""How fast a float32 weight becomes bfloat16, what `mixed_bfloat16` does to every kernel on
every call: TensorFlow's `Cast` (plain and under XLA; to float16 for comparison) against
PyTorch's `.to(torch.bfloat16)` (what autocast does), in G elements per second, best of
`--rounds` x `--calls`. PyTorch runs in `bench/.venvs/torch` when `bench/setup_envs.sh` built it.

Example:
    .venv/bin/python bench/cast_bfloat16.py
"""

import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench/ helpers
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402
from absl import app, flags  # noqa: E402

from benchmarking import PEER_PYTHON, cpu_description  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_list("shape", ["768", "3072"], "The kernel cast (BERT-base's FFN kernel).")
flags.DEFINE_integer("calls", 50, "Calls per round.")
flags.DEFINE_integer("rounds", 7, "Rounds; the best is reported.")

# The same measurement in PyTorch, run by the peer venv's interpreter: argv = rows, columns,
# calls, rounds; prints the best seconds per call.
_TORCH_CAST = """
import sys, time, torch
rows, columns, calls, rounds = map(int, sys.argv[1:])
torch.set_num_threads(2)
x = torch.randn(rows, columns)
x.to(torch.bfloat16)
best = float("inf")
for _ in range(rounds):
    start = time.perf_counter()
    for _ in range(calls):
        x.to(torch.bfloat16)
    best = min(best, (time.perf_counter() - start) / calls)
print(best)
"""


def best_seconds(cast):
    cast().numpy()  # trace (and compile)
    best = float("inf")
    for _ in range(FLAGS.rounds):
        start = time.perf_counter()
        for _ in range(FLAGS.calls):
            result = cast()
        result.numpy()
        best = min(best, (time.perf_counter() - start) / FLAGS.calls)
    return best


def main(argv):
    del argv
    shape = [int(n) for n in FLAGS.shape]
    kernel = tf.Variable(tf.random.normal(shape, seed=0))
    elements = kernel.shape.num_elements()
    # Each returns the whole cast tensor, so that XLA cannot slice before casting.
    casts = {"TensorFlow Cast to bfloat16": tf.function(lambda: tf.cast(kernel, tf.bfloat16)),
             "the same under XLA": tf.function(lambda: tf.cast(kernel, tf.bfloat16),
                                               jit_compile=True),
             "TensorFlow Cast to float16": tf.function(lambda: tf.cast(kernel, tf.float16))}
    print(f"{cpu_description()}; float32 {shape} (best of {FLAGS.rounds} x {FLAGS.calls} calls):")
    for name, cast in casts.items():
        seconds = best_seconds(cast)
        print(f"  {name:30s} {seconds * 1e3:6.3f} ms, {elements / seconds / 1e9:5.2f} G elements/s")
    torch_python = PEER_PYTHON["transformers"]
    if os.path.exists(torch_python):
        seconds = float(subprocess.run(
            [torch_python, "-c", _TORCH_CAST, *map(str, shape), str(FLAGS.calls),
             str(FLAGS.rounds)], capture_output=True, text=True, check=True).stdout)
        print(f"  {'PyTorch .to(torch.bfloat16)':30s} {seconds * 1e3:6.3f} ms, "
              f"{elements / seconds / 1e9:5.2f} G elements/s")
    else:
        print(f"  PyTorch: {torch_python} missing (run bash bench/setup_envs.sh)")


if __name__ == "__main__":
    app.run(main)
