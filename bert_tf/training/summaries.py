"""TensorBoard scalars without the `tensorboard` package: `write_scalars` and the Keras
callback `ScalarSummaries`; and when a periodic write (or checkpoint) falls due during `fit`:
`optimizer_step`, `passed_a_multiple`.

`tf.summary.scalar` needs the `tensorboard` package just to *write* a scalar; writing the
scalar plugin's metadata ourselves keeps TensorBoard a viewer-only dependency.

Example:
    >>> writer = tf.summary.create_file_writer("/tmp/run/eval")
    >>> write_scalars(writer, step=1000, scalars={"accuracy": 0.91})
    >>> model.fit(dataset, callbacks=[ScalarSummaries("/tmp/run", every_n_steps=50)])
"""

import os
import time

import keras
import tensorflow as tf
from tensorflow.core.framework import summary_pb2

_SCALAR_METADATA = summary_pb2.SummaryMetadata(
    plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars"),
    data_class=summary_pb2.DATA_CLASS_SCALAR)


def write_scalars(writer, step, scalars):
    """Writes `{name: float}` as TensorBoard scalars at `step`."""
    with writer.as_default(step=step):
        for name, value in scalars.items():
            tf.summary.write(name, tf.constant(value, tf.float32), metadata=_SCALAR_METADATA)


def optimizer_step(model):
    """The optimizer steps `model` has taken (its optimizer's `iterations`, restored ones
    included), as an int.

    Example:
        >>> optimizer_step(model)   # after a fit of 120 steps resumed at step 100
        220
    """
    return int(keras.ops.convert_to_numpy(model.optimizer.iterations))


def passed_a_multiple(previous_step, step, period):
    """Whether going from optimizer step `previous_step` to `step` passed a multiple of `period`.

    Keras calls back once per host call, which may run several steps (`steps_per_execution`),
    so work due every `period` steps falls due at the end of the call passing its multiple,
    which need not be a multiple itself.

    Example:
        >>> passed_a_multiple(3, 6, period=4), passed_a_multiple(4, 6, period=4)
        (True, False)
    """
    return step // period > previous_step // period


class ScalarSummaries(keras.callbacks.Callback):
    """Writes the training logs (loss, metrics), the learning rate and `examples_per_second`
    to `log_dir/train` every `every_n_steps` optimizer steps, and the validation logs of `fit`
    to `log_dir/eval`.

    The step is the optimizer's iteration count, so a resumed run continues the same curves.
    Each write covers the steps since the previous one (or the epoch's start, the first call's
    tracing included): Keras' logs are means over the whole epoch, and fine-tuning runs as one
    epoch, so the loss and metrics written are each mean's own share of those steps (its total
    and count then minus now), and examples per second are counted by the compiled loss' mean,
    which weighs each batch by its number of examples.
    """

    def __init__(self, log_dir, every_n_steps=50):
        super().__init__()
        self.log_dir = log_dir
        self.every_n_steps = every_n_steps
        self._writers = {}
        self._last_logs = None
        self._since = None  # ({name: (total, count)} of the means, time) at the previous write
        self._written_step = None  # the optimizer step of the previous write (or the start)

    def _means(self):
        """{name: (total, count)} of the model's mean metrics in this epoch, the loss included."""
        means, pending = {}, list(self.model.metrics)
        while pending:
            metric = pending.pop()
            pending.extend(getattr(metric, "metrics", None) or [])  # compiled metric containers
            total, count = getattr(metric, "total", None), getattr(metric, "count", None)
            if total is not None and count is not None:
                means[metric.name] = (float(keras.ops.convert_to_numpy(total)),
                                      float(keras.ops.convert_to_numpy(count)))
        return means

    def _writer(self, name):
        if name not in self._writers:
            self._writers[name] = tf.summary.create_file_writer(os.path.join(self.log_dir, name))
        return self._writers[name]

    def _learning_rate(self):
        rate = self.model.optimizer.learning_rate
        return float(keras.ops.convert_to_numpy(rate))

    def _write_train_logs(self, logs):
        scalars = {name: float(value) for name, value in logs.items()}
        scalars["learning_rate"] = self._learning_rate()
        means, now = self._means(), time.perf_counter()
        before, then = self._since or ({}, None)
        for name, (total, count) in means.items():
            total_before, count_before = before.get(name, (0.0, 0.0))
            if name in scalars and count > count_before:
                scalars[name] = (total - total_before) / (count - count_before)
        if "loss" in means and then is not None and now > then:
            examples = means["loss"][1] - before.get("loss", (0.0, 0.0))[1]
            scalars["examples_per_second"] = examples / (now - then)
        self._since = (means, now)
        write_scalars(self._writer("train"), optimizer_step(self.model), scalars)

    def on_epoch_begin(self, epoch, logs=None):
        self._since = ({}, time.perf_counter())  # fit has just reset the means

    def on_train_begin(self, logs=None):
        self._written_step = optimizer_step(self.model)

    def on_train_batch_end(self, batch, logs=None):
        self._last_logs = logs
        step = optimizer_step(self.model)
        if logs and passed_a_multiple(self._written_step, step, self.every_n_steps):
            self._write_train_logs(logs)
            self._written_step = step

    def on_epoch_end(self, epoch, logs=None):
        validation = {name[len("val_"):]: float(value) for name, value in (logs or {}).items()
                      if name.startswith("val_")}
        if validation:
            write_scalars(self._writer("eval"), optimizer_step(self.model), validation)

    def on_train_end(self, logs=None):
        # The last step too, so that short runs and the end of every run are on the curves.
        if self._last_logs and optimizer_step(self.model) != self._written_step:
            self._write_train_logs(self._last_logs)
        for writer in self._writers.values():
            writer.close()
        self._writers = {}
