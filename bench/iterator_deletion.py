"""How long deleting a tf.data iterator takes, with tf.data's autotuning and without
(`bert_tf.data.without_autotuning`): each trial reads an `AUTOTUNE` map-and-prefetch pipeline
for `--read_seconds`, then deletes its iterator. With autotuning, a deletion sometimes waits out
the rest of the autotuning thread's sleep (a period that doubles after each tuning, up to a
minute), so a longer read makes the occasional wait longer. The race needs the cores busy, as
a training step keeps them: `--busy_processes` spin beside the trials (none: an idle machine,
where the wait was not seen).

Example:
    .venv/bin/python bench/iterator_deletion.py --trials=30 --read_seconds=3
"""

import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench/ helpers
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402
from absl import app, flags  # noqa: E402

from benchmarking import cpu_description  # noqa: E402
from bert_tf.data.without_autotuning import without_autotuning  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_integer("trials", 30, "Iterators made, read and deleted per setting.")
flags.DEFINE_float("read_seconds", 3.0, "How long each iterator is read before its deletion.")
flags.DEFINE_float("slow_seconds", 0.05, "A deletion taking longer counts as a wait.")
flags.DEFINE_integer("busy_processes", 2, "Processes spinning on the CPU during the trials.")


def pipeline():
    return (tf.data.Dataset.range(10**12)
            .map(lambda x: x * 2, num_parallel_calls=tf.data.AUTOTUNE)
            .batch(8).prefetch(tf.data.AUTOTUNE))


def deletion_seconds(dataset):
    iterator = iter(dataset)
    end = time.perf_counter() + FLAGS.read_seconds
    while time.perf_counter() < end:
        next(iterator)
        time.sleep(0.01)  # a consumer with work of its own, as a training step
    started = time.perf_counter()
    del iterator
    return time.perf_counter() - started


def main(argv):
    del argv
    print(cpu_description())
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                for _ in range(FLAGS.busy_processes)]
    try:
        compare()
    finally:
        for spinner in spinners:
            spinner.kill()


def compare():
    for name, make in (("autotuned", pipeline), ("without_autotuning",
                                                 lambda: without_autotuning(pipeline()))):
        seconds = sorted(deletion_seconds(make()) for _ in range(FLAGS.trials))
        waits = [s for s in seconds if s > FLAGS.slow_seconds]
        print(f"{name}: {len(waits)} of {FLAGS.trials} deletions over {FLAGS.slow_seconds} s "
              f"(longest {seconds[-1]:.2f} s, median {seconds[len(seconds) // 2]:.3f} s)",
              flush=True)


if __name__ == "__main__":
    app.run(main)
