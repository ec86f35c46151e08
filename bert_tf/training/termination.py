"""Preemption: a SIGTERM during training saves a checkpoint and stops it, resumably.

TPU/GCE preemption, Kubernetes, `docker stop`, `timeout` and batch schedulers send SIGTERM,
usually ~30 s before SIGKILL. Python's default then ends the process at once (exit 143), losing
the steps since the last checkpoint. While `recording_sigterm` is active, the signal is only
recorded; the training loops look at the record at the end of each host call, save a checkpoint
at that step and raise `TrainingTerminated`, which `bert_tf.cli.app.run_tool` reports in one line
(exit status 1).

Example:
    >>> with recording_sigterm() as terminated:
    ...     while step < num_train_steps:
    ...         step = run_one_host_call()
    ...         if terminated:
    ...             raise TrainingTerminated(terminated.signum, step, manager.save(step))
"""

import contextlib
import signal
import threading

import tensorflow as tf


class TrainingTerminated(RuntimeError):
    """Training stopped on a signal after saving a checkpoint; the message is the line to show.
    `signum` None: the signal reached another worker of a multi-worker job, not this one.

    A RuntimeError: `run_tool` prints its message as the tool's one-line error, exit status 1.
    """

    def __init__(self, signum, step, checkpoint):
        cause = ("SIGTERM to another worker" if signum is None
                 else signal.Signals(signum).name)
        super().__init__(f"terminated ({cause}) at step {step}: saved {checkpoint}; run the "
                         f"same command to resume")
        self.signum = signum
        self.step = step
        self.checkpoint = checkpoint


class _Received:
    """The signal recorded (`signum`, None until one arrives); true once one has."""

    def __init__(self):
        self.signum = None

    def __bool__(self):
        return self.signum is not None


def single_process(strategy):
    """Whether `strategy` trains in this process alone (anything but a MultiWorkerMirrored
    strategy over several workers)."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy) or resolver is None:
        return True
    cluster = resolver.cluster_spec().as_dict()
    return sum(len(cluster.get(job, ())) for job in ("chief", "worker")) <= 1


@contextlib.contextmanager
def recording_sigterm():
    """Within the block, SIGTERM is only recorded in the object yielded (true once received);
    the previous handler is back afterwards. Outside the main thread (where no handler can be
    installed), the signal keeps its handler and the record stays false.

    A checkpoint is a collective in multi-worker training: every worker must save at the same
    step, but SIGTERM may reach only some of them, at different host calls, and a worker saving
    alone would wait forever for the others. So multi-worker pre-training asks every worker
    after each host call (`AnyWorkerTerminated`).
    """
    received = _Received()
    if threading.current_thread() is not threading.main_thread():
        yield received
        return

    def record(signum, _frame):  # no work in a signal handler: the loops act on the record
        received.signum = signum

    previous = signal.signal(signal.SIGTERM, record)
    try:
        yield received
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)


class AnyWorkerTerminated:
    """`strategy`'s vote after a host call: whether SIGTERM reached any worker. Every worker
    calls it at the same point (it is a collective), so all of them stop at the same step.

    Example:
        >>> any_worker_terminated = AnyWorkerTerminated(strategy)
        >>> with recording_sigterm() as terminated:
        ...     ...                                    # a host call
        ...     if any_worker_terminated(terminated):  # the same answer on every worker
        ...         raise TrainingTerminated(terminated.signum, step, manager.save(step))
    """

    def __init__(self, strategy):
        self.strategy = strategy
        self.single_process = single_process(strategy)
        # A float: CPU collectives reduce floats in every TensorFlow version. One scalar
        # all-reduce per host call, next to the gradients' all-reduce of every step.
        self._votes = tf.function(lambda vote: strategy.reduce(
            tf.distribute.ReduceOp.SUM, strategy.run(lambda: tf.identity(vote)), axis=None))

    def __call__(self, terminated):
        """`terminated`: this process' `recording_sigterm` record."""
        if self.single_process:
            return bool(terminated)
        return bool(self._votes(tf.constant(1.0 if terminated else 0.0)) > 0)
