"""Preemption and Ctrl-C: a SIGTERM or SIGINT during training saves a checkpoint and stops it,
resumably.

TPU/GCE preemption, Kubernetes, `docker stop`, `timeout` and batch schedulers send SIGTERM,
usually ~30 s before SIGKILL; Ctrl-C sends SIGINT. Python's defaults then end the process at
once, losing the steps since the last checkpoint (1,000 steps apart by default: most of a GLUE
run). While `recording_stop_signals` is active, the signals are only recorded; the training
loops look at the record at the end of each host call, save a checkpoint at that step and raise
`TrainingTerminated`, which `bert_tf.cli.app.run_tool` reports in one line. A second Ctrl-C
stops at once, without saving (KeyboardInterrupt).

Example:
    >>> with recording_stop_signals() as terminated:
    ...     while step < num_train_steps:
    ...         step = run_one_host_call()
    ...         if terminated:
    ...             raise TrainingTerminated(terminated.signum, step, manager.save(step))
"""

import contextlib
import signal
import threading

import tensorflow as tf

from bert_tf.training.distribution import single_process

_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class TrainingTerminated(RuntimeError):
    """Training stopped on a signal after saving a checkpoint; the message is the line to show.
    `another_worker`: the signal reached another worker of a multi-worker job, not this one.

    A RuntimeError: `run_tool` prints its message as the tool's one-line error (exit status 1),
    or, for SIGINT, as its "interrupted" line (the process then ends by SIGINT, as on Ctrl-C).
    """

    def __init__(self, signum, step, checkpoint, another_worker=False):
        name = signal.Signals(signum).name
        cause = f"{name} to another worker" if another_worker else name
        verb = "interrupted" if signum == signal.SIGINT else "terminated"
        super().__init__(f"{verb} ({cause}) at step {step}: saved {checkpoint}; run the same "
                         f"command to resume")
        self.signum = signum
        self.step = step
        self.checkpoint = checkpoint


class _Received:
    """The first stop signal recorded (`signum`, None until one arrives); true once one has."""

    def __init__(self):
        self.signum = None

    def __bool__(self):
        return self.signum is not None


@contextlib.contextmanager
def recording_stop_signals():
    """Within the block, SIGTERM and SIGINT are only recorded in the object yielded (true once
    one was received; a second SIGINT raises KeyboardInterrupt at once); the previous handlers
    are back afterwards. Outside the main thread (where no handler can be installed), the
    signals keep their handlers and the record stays false.

    A checkpoint is a collective in multi-worker training: every worker must save at the same
    step, but a signal may reach only some of them, at different host calls, and a worker
    saving alone would wait forever for the others. So multi-worker pre-training asks every
    worker after each host call (`AnyWorkerTerminated`).
    """
    received = _Received()
    if threading.current_thread() is not threading.main_thread():
        yield received
        return

    def record(signum, _frame):  # no work in a signal handler: the loops act on the record
        if signum == signal.SIGINT and received.signum == signal.SIGINT:
            raise KeyboardInterrupt  # Ctrl-C again: stop now, without the checkpoint
        if received.signum is None:
            received.signum = signum

    previous = {signum: signal.signal(signum, record) for signum in _STOP_SIGNALS}
    try:
        yield received
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)


class AnyWorkerTerminated:
    """`strategy`'s vote after a host call: the stop signal that reached a worker (this one's
    own first), or None. Every worker calls it at the same point (it is a collective), so all of
    them stop at the same step.

    Example:
        >>> any_worker_terminated = AnyWorkerTerminated(strategy)
        >>> with recording_stop_signals() as terminated:
        ...     ...                                         # a host call
        ...     if signum := any_worker_terminated(terminated):  # the same on every worker
        ...         raise TrainingTerminated(signum, step, manager.save(step),
        ...                                  another_worker=not terminated)
    """

    def __init__(self, strategy):
        self.strategy = strategy
        self.single_process = single_process(strategy)
        # Floats (one per stop signal: how many workers got it): CPU collectives reduce floats
        # in every TensorFlow version. One small all-reduce per host call, next to the
        # gradients' all-reduce of every step.
        self._votes = tf.function(lambda vote: strategy.reduce(
            tf.distribute.ReduceOp.SUM, strategy.run(lambda: tf.identity(vote)), axis=None))

    def __call__(self, terminated):
        """`terminated`: this process' `recording_stop_signals` record."""
        # Read once: every worker decides on the votes alone. A signal arriving during the vote
        # counts at the next one; answering it now made this worker stop alone while the others
        # trained on (the chief's next collective then failed, or waited for ever).
        own = terminated.signum
        if self.single_process:
            return own
        votes = self._votes(tf.constant([float(own == signum)
                                         for signum in _STOP_SIGNALS])).numpy()
        if own is not None:
            return own
        return next((signum for signum, count in zip(_STOP_SIGNALS, votes) if count > 0), None)
