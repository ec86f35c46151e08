"""Where the time of a bert_tf pre-training step goes: TensorFlow profiler trace of the step that
`bench/pretraining_throughput.py` times, summed by op type and by op (per step, in ms of op
time: ops running on both cores at once count twice).

Uses `pretraining_throughput`'s flags (--configs, --batch_size, --seq_length, --dtype, ...) and
its step; without XLA (`plain`), where the ops stay visible. This is how the slow parts of the
step were found (docs/PERFORMANCE.md, "Pre-training").

Example:
    .venv/bin/python bench/pretraining_profile.py --configs=bert_mini
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench/ helpers

from absl import app, flags  # noqa: E402
from pretraining_throughput import make_batch, our_step_timer  # noqa: E402

from benchmarking import config_by_name, profile_report  # noqa: E402
from bert_tf.training import distribution  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_integer("profiled_steps", 2, "Steps in the trace.")
flags.DEFINE_integer("top", 25, "Rows of each table.")


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    strategy = distribution.create_strategy(FLAGS.strategy)
    for config_name in FLAGS.configs:
        config = config_by_name(config_name)
        batch = make_batch(config, FLAGS.batch_size, FLAGS.seq_length,
                           FLAGS.max_predictions_per_seq)
        step = our_step_timer(strategy, config, batch, "plain")
        print(f"\n{config_name}, batch {FLAGS.batch_size}, seq {FLAGS.seq_length}, {FLAGS.dtype}, "
              f"per step: {profile_report(step, FLAGS.profiled_steps, FLAGS.top)}")


if __name__ == "__main__":
    app.run(main)
