"""Reading back the TensorBoard scalars a training job wrote (`summaries.write_scalars`), for
summaries and plots without the `tensorboard` package.

Example:
    >>> losses = read_scalars("/tmp/pretraining/train")["loss"]
    >>> losses[0]
    ScalarEvent(step=100, wall_time=1763750000.5, value=9.1)
"""

import collections
import os

import tensorflow as tf
from tensorflow.core.util import event_pb2

ScalarEvent = collections.namedtuple("ScalarEvent", ["step", "wall_time", "value"])


def read_scalars(directory):
    """`{tag: [ScalarEvent, ...]}` from every event file in `directory` (oldest file first, then
    in writing order); {} when `directory` does not exist. A resumed job appends a new file,
    so steps done twice appear twice. Local or remote (gs://...)."""
    if not tf.io.gfile.isdir(directory):
        return {}
    # By modification time, then by name (which starts with the creation time in seconds):
    # ram:// gives every file the time 0.
    paths = sorted((os.path.join(directory, name) for name in tf.io.gfile.listdir(directory)
                    if ".tfevents." in name),
                   key=lambda path: (tf.io.gfile.stat(path).mtime_nsec, path))
    scalars = collections.defaultdict(list)
    for path in paths:
        for record in tf.data.TFRecordDataset(path):
            event = event_pb2.Event.FromString(record.numpy())
            for value in event.summary.value:
                scalars[value.tag].append(ScalarEvent(
                    event.step, event.wall_time, float(tf.make_ndarray(value.tensor))))
    return dict(scalars)
