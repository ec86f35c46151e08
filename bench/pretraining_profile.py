"""Where the time of a bert_tf pre-training step goes: TensorFlow profiler trace of the step that
`bench/pretraining_throughput.py` times, summed by op type and by op (per step, in ms of op
time: ops running on both cores at once count twice).

Uses `pretraining_throughput`'s flags (--configs, --batch_size, --seq_length, --dtype, ...) and
its step; without XLA (`plain`), where the ops stay visible. This is how the slow parts of the
step were found (docs/PERFORMANCE.md, "Pre-training").

Example:
    /work/venv/bin/python bench/pretraining_profile.py --configs=bert_mini
"""

import collections
import glob
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench/ helpers

import tensorflow as tf  # noqa: E402
from absl import app, flags  # noqa: E402
from pretraining_throughput import make_batch, our_step_timer  # noqa: E402
from tensorflow.tsl.profiler.protobuf import xplane_pb2  # noqa: E402

from benchmarking import config_by_name  # noqa: E402
from bert_tf.training import distribution  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_integer("profiled_steps", 2, "Steps in the trace.")
flags.DEFINE_integer("top", 25, "Rows of each table.")


def op_times(trace_dir, steps):
    """`({op type: ms per step}, {op name: ms per step})` from a profiler trace."""
    path, = glob.glob(os.path.join(trace_dir, "**", "*.xplane.pb"), recursive=True)
    space = xplane_pb2.XSpace()
    with open(path, "rb") as f:
        space.ParseFromString(f.read())
    by_type, by_name = collections.Counter(), collections.Counter()
    for plane in space.planes:
        for line in plane.lines:
            for event in line.events:
                name = plane.event_metadata[event.metadata_id].name
                if ":" not in name or "::" in name or name.startswith("$"):
                    continue  # not a TensorFlow op ("name:type"): the runtime's own events
                op_name, op_type = name.rsplit(":", 1)
                if not op_type or op_type[0].isspace():
                    continue  # "EagerLocalExecute: <function>"
                op_name = op_name.removeprefix("while/body/_1/while/StatefulPartitionedCall/")
                ms = event.duration_ps / 1e9 / steps
                by_type[op_type] += ms
                # Layers differ only by index: "layer_3_1/..." counts as "layer_N/...".
                by_name[f"{re.sub(r'layer_[0-9]+(_[0-9]+)?', 'layer_N', op_name)}:{op_type}"] += ms
    return by_type, by_name


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    strategy = distribution.create_strategy(FLAGS.strategy)
    for config_name in FLAGS.configs:
        config = config_by_name(config_name)
        batch = make_batch(config, FLAGS.batch_size, FLAGS.seq_length,
                           FLAGS.max_predictions_per_seq)
        step = our_step_timer(strategy, config, batch, "plain")
        best = min(step() for _ in range(3))
        with tempfile.TemporaryDirectory() as trace_dir:
            tf.profiler.experimental.start(trace_dir)
            for _ in range(FLAGS.profiled_steps):
                step()
            tf.profiler.experimental.stop()
            by_type, by_name = op_times(trace_dir, FLAGS.profiled_steps)
        print(f"\n{config_name}, batch {FLAGS.batch_size}, seq {FLAGS.seq_length}, {FLAGS.dtype}: "
              f"best step {best * 1000:.0f} ms (of 3); op time per step:")
        for title, table in (("op type", by_type), ("op", by_name)):
            print(f"\n| ms | {title} |\n|---|---|")
            for name, ms in table.most_common(FLAGS.top):
                print(f"| {ms:.1f} | {name[-110:]} |")


if __name__ == "__main__":
    app.run(main)
