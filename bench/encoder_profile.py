"""Where the time of a bert_tf encoder forward pass goes: a TensorFlow profiler trace of the
forward pass that `bench/encoder_throughput.py` times (plain `tf.function`, where the ops stay
visible), summed by op type and by op, in ms of op time per pass (ops running on both cores at
once count twice).

Uses `encoder_throughput`'s flags (--configs, --dtypes, --batch_size, --seq_length,
--fetch_sequence_output, --intra_op_threads, --inter_op_threads). With
`--inter_op_threads=1` one op runs at a time, so each op's time is wall time and the ops sum
to the pass: the way to read a matmul's own rate (its FLOPs over its time).

Example:
    python bench/encoder_profile.py --configs=bert_base --dtypes=float32,bfloat16
    python bench/encoder_profile.py --configs=bert_base --dtypes=float32 --inter_op_threads=1
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench/ helpers

from absl import app, flags  # noqa: E402
from encoder_throughput import OurEncoders, apply_thread_flags, make_inputs  # noqa: E402

from benchmarking import config_by_name, profile_report  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_integer("profiled_passes", 2, "Forward passes in the trace.")
flags.DEFINE_integer("top", 25, "Rows of each table.")


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    apply_thread_flags()
    encoders = OurEncoders()
    for config_name in FLAGS.configs:
        inputs = make_inputs(config_by_name(config_name), FLAGS.batch_size, FLAGS.seq_length)
        for dtype in FLAGS.dtypes:
            forward, _ = encoders.prepare(config_name, dtype, "plain", inputs)
            print(f"\n{config_name}, batch {FLAGS.batch_size}, seq {FLAGS.seq_length}, {dtype}, "
                  f"per pass: {profile_report(forward, FLAGS.profiled_passes, FLAGS.top)}")


if __name__ == "__main__":
    app.run(main)
