"""`size_thread_pools`: TensorFlow's intra-op and inter-op thread pools, sized before its first
op, with a one-line error naming the setting when that is too late; `ops_side_by_side_on_cores`:
whether the pools run single-threaded ops side by side.

TensorFlow runs each op on up to intra-op threads and independent ops side by side on the
inter-op threads; both default to one per core. Small ops gain little from a second thread
and lose the hand-over: a MiniLM fine-tuning step on SST-2's short batches (32 x ~15 word
pieces) ran 12 % faster on a 2-vCPU Xeon with one intra-op thread (two ops at once instead),
while long batches (32 x 64, 32 x 128) ran 17 % and 26 % slower (docs/PERFORMANCE.md) until
the fine-tuning step ran in batch halves: with them one thread per op was faster at every
length measured (2-vCPU AMD EPYC, 32 x 128: 857 against 871 ms).

Example:
    >>> size_thread_pools(intra_op=1, inter_op=0)   # 0 leaves a pool at TensorFlow's default
    >>> ops_side_by_side_on_cores()                  # True on a CPU with 2 cores or more
"""

import os

import tensorflow as tf


def size_thread_pools(intra_op, inter_op, names=("intra_op", "inter_op")):
    """Sets TensorFlow's intra-/inter-op thread pools (0 leaves one alone). ValueError, naming
    the setting by `names`, when a size is negative or the pools already run with other sizes
    (TensorFlow fixes them at its first op)."""
    threading_config = tf.config.threading
    for name, size, current, set_size in (
            (names[0], intra_op, threading_config.get_intra_op_parallelism_threads,
             threading_config.set_intra_op_parallelism_threads),
            (names[1], inter_op, threading_config.get_inter_op_parallelism_threads,
             threading_config.set_inter_op_parallelism_threads)):
        if size < 0:
            raise ValueError(f"{name} must be >= 0 (0: one thread per core), got {size}")
        if size and size != current():
            try:
                set_size(size)
            except RuntimeError:
                raise ValueError(f"{name}={size} cannot take effect: TensorFlow already ran "
                                 f"in this process with {current() or 'default'} threads; set "
                                 f"it before the first TensorFlow op.") from None


def ops_side_by_side_on_cores():
    """True when the ops run on the CPU's cores (no TPU or GPU configured), each op on one
    thread (intra-op parallelism 1) and several ops at once (more than one inter-op thread):
    then only independent ops keep more than one core busy, and work split into independent
    halves (`bert_tf.models.batch_halves`) runs on two cores where one chain would use one."""
    intra_op, inter_op = _pool_sizes()
    return intra_op == 1 and inter_op > 1 and _cpu_only()


def cores_for_two_ops_at_once():
    """True when the ops run on the CPU's cores (no TPU or GPU configured) with more than one
    thread in each pool: an op TensorFlow runs on one thread whatever its pool (a small matmul,
    `onednn.single_threaded_matmul`) leaves a core idle, which an independent op beside it
    can take (`dense_rows`' row halves)."""
    intra_op, inter_op = _pool_sizes()
    return intra_op > 1 and inter_op > 1 and _cpu_only()


def _pool_sizes():
    """`(intra_op, inter_op)`: the threads of TensorFlow's two pools in this process."""
    threading_config = tf.config.threading
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    # 0: not set in this process; TensorFlow then reads these variables, else one per core.
    return (threading_config.get_intra_op_parallelism_threads()
            or int(os.environ.get("TF_NUM_INTRAOP_THREADS") or 0) or cores,
            threading_config.get_inter_op_parallelism_threads()
            or int(os.environ.get("TF_NUM_INTEROP_THREADS") or 0) or cores)


def _cpu_only():
    return not (tf.config.list_logical_devices("TPU") or tf.config.list_logical_devices("GPU"))
