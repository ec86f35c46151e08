"""Building the `tf.distribute` strategy named by `--strategy`.

Example:
    >>> strategy = create_strategy("mirrored")          # every GPU, else every logical CPU
    >>> strategy = create_strategy("tpu", tpu="grpc://10.2.3.4:8470")
"""

import logging
import os
import re
import socket
import urllib.parse

import tensorflow as tf

from bert_tf.data.without_autotuning import without_autotuning
from bert_tf.training import tpu_host

logger = logging.getLogger("bert_tf.training")

STRATEGIES = ("tpu", "mirrored", "multi_worker_mirrored", "one_device", "cpu")

# How long to wait for a TPU worker's gRPC port before giving up with a clear error.
TPU_CONNECT_TIMEOUT_SECONDS = 10.0


class TpuUnavailableError(RuntimeError):
    """The TPU named by `--tpu` cannot be reached or initialised."""


def create_strategy(name, tpu=None):
    """The strategy `name` (one of `STRATEGIES`).

    * `tpu`: `TPUStrategy` on the TPU at `tpu` (`grpc://host:port`, a Cloud TPU name, or
      "local" on a TPU VM; None: TensorFlow's auto-detection, e.g. `$TPU_NAME`).
    * `mirrored`: synchronous data parallelism over this machine's GPUs, or over its logical
      CPU devices when it has none (one, unless `tf.config` split the CPU).
    * `multi_worker_mirrored`: the same across machines; the cluster comes from `$TF_CONFIG`.
    * `one_device`: the first GPU, else the CPU. `cpu`: the CPU even when there are GPUs.

    Call it before running any TensorFlow op: a multi-worker strategy configures TensorFlow's
    collective ops, which only works before the runtime starts.
    """
    if name == "tpu":
        return _tpu_strategy(tpu)
    if tpu:
        raise ValueError(f"--tpu={tpu} is only used with --strategy=tpu, not {name}")
    if name == "multi_worker_mirrored":  # first: listing devices would start the runtime
        return tf.distribute.MultiWorkerMirroredStrategy()
    gpus = [d.name for d in tf.config.list_logical_devices("GPU")]
    if name == "mirrored":
        return tf.distribute.MirroredStrategy(
            gpus or [d.name for d in tf.config.list_logical_devices("CPU")])
    if name == "one_device":
        return tf.distribute.OneDeviceStrategy(gpus[0] if gpus else "/cpu:0")
    if name == "cpu":
        return tf.distribute.OneDeviceStrategy("/cpu:0")
    raise ValueError(f"Unknown strategy {name!r}; choose one of {', '.join(STRATEGIES)}")


def _check_reachable(address):
    # TensorFlow retries an unreachable gRPC worker for minutes; a plain TCP connect says
    # "nobody there" in milliseconds (refused) or after the timeout (unroutable).
    parsed = urllib.parse.urlparse(address)
    if not parsed.hostname or not parsed.port:
        raise TpuUnavailableError(f"--tpu={address}: expected grpc://HOST:PORT (a TPU node's "
                                  f"worker listens on port 8470)")
    try:
        with socket.create_connection((parsed.hostname, parsed.port),
                                      timeout=TPU_CONNECT_TIMEOUT_SECONDS):
            pass
    except OSError as e:
        raise TpuUnavailableError(
            f"Cannot reach the TPU worker at {address} (--tpu): {e}. Fix: check the address "
            f"and port, that the TPU is running, and that this machine's network reaches it.") \
            from e


def _check_tensorflow_build(tpu):
    """Fails at once when the installed TensorFlow cannot drive the TPU `tpu` names."""
    installed = tpu_host.tensorflow_distributions()
    if len(installed) > 1:
        raise TpuUnavailableError(
            f"Several TensorFlow distributions are installed ({', '.join(installed)}), "
            f"overwriting each other's files. Fix: a fresh virtualenv with only tensorflow-tpu "
            f"(README.md, section TPU: its install line).")
    if tpu != "local":
        return  # a TPU node or a named TPU runs its own TensorFlow; any build can connect
    if "tensorflow-tpu" not in installed:
        raise TpuUnavailableError(
            f"This TensorFlow ({', '.join(installed) or 'unknown'} {tf.__version__}) has no TPU "
            f"support, which --tpu=local needs. Fix: on the TPU VM, install tensorflow-tpu "
            f"2.20 with README.md's TPU install line, in a fresh virtualenv.")
    if not tpu_host.local_tpu_chips() and os.environ.get(tpu_host.LOAD_LIBRARY_VARIABLE) != "1":
        raise TpuUnavailableError(
            f"No TPU found on this machine (--tpu=local): no TPU chip device (/dev/accel*, "
            f"/dev/vfio/*). Fix: run on a TPU VM, or pass a TPU node's --tpu=grpc://HOST:8470 "
            f"or name, or use --strategy=mirrored (GPUs or CPU); "
            f"{tpu_host.LOAD_LIBRARY_VARIABLE}=1 makes TensorFlow look anyway.")


def explain_tpu_error(tpu, error):
    """A `TpuUnavailableError` whose one-line message names the cause of `error`, raised by
    TensorFlow while connecting to, initialising or running on the TPU `tpu`, and the fix.

    Example:
        >>> explain_tpu_error("grpc://10.2.3.4:8470", tf.errors.NotFoundError(
        ...     None, None, "Op type not registered 'NormalizeUTF8' in binary running on w-0"))
        TpuUnavailableError('The TensorFlow running the TPU (--tpu=grpc://10.2.3.4:8470) does
        not know the op NormalizeUTF8: it is another version than this machine's 2.21.0, ...')
    """
    where = f"--tpu={tpu}" if tpu else "--tpu not given"
    detail = " ".join(str(getattr(error, "message", error)).split())
    # Graph and eager wording of the same problem.
    unregistered = re.search(r"Op type not registered '([^']+)'|'([^']+)' is neither a type of a "
                             r"primitive operation nor a name of a function registered", detail)
    if unregistered:
        return TpuUnavailableError(
            f"The TensorFlow running the TPU ({where}) does not know the op "
            f"{unregistered.group(1) or unregistered.group(2)}: it is another version than "
            f"this machine's {tf.__version__}, or has no tensorflow-text. Fix: on a TPU VM, "
            f"tensorflow-tpu {tf.__version__} (README.md, section TPU); on a TPU node, runtime "
            f"version tpu-vm-tf-{tf.__version__} and --input_file records instead of raw text.")
    if "No OpKernel was registered to support Op 'ConfigureDistributedTPU'" in detail:
        return TpuUnavailableError(
            f"No TPU behind {where}: the TensorFlow that should drive it has no TPU kernels. "
            f"Fix: on a TPU VM, --tpu=local with tensorflow-tpu (README.md, section TPU); "
            f"else a TPU node's grpc://HOST:8470 or name.")
    if tpu is None and "provide a TPU Name" in detail:
        return TpuUnavailableError(
            "No TPU given and none detected (--strategy=tpu without --tpu). Fix: --tpu=local on "
            "a TPU VM, or a TPU node's --tpu=grpc://HOST:8470 or name.")
    if "TPUs not found in the cluster" in detail or "TPU_SYSTEM" in detail:
        return TpuUnavailableError(
            f"No TPU found ({where}): TensorFlow sees no TPU device ({detail[:200]}). Fix: run "
            f"on a TPU VM with --tpu=local, check the TPU's name or address, or use "
            f"--strategy=mirrored (GPUs or CPU).")
    if tpu and tpu != "local" and not tpu.startswith("grpc://") and "urlopen" in detail:
        return TpuUnavailableError(
            f"Cannot look up the TPU named {tpu} (--tpu): {detail[:200]}. A name is resolved "
            f"through Google Cloud's metadata server and TPU API. Fix: run on a Google Cloud VM "
            f"in the TPU's project and zone, or pass the node's --tpu=grpc://IP:8470.")
    return TpuUnavailableError(
        f"Cannot use the TPU ({where}): {detail[:300]}. Fix: check --tpu, that the TPU is "
        f"running, and that its runtime version is TensorFlow {tf.__version__}.")


def _tpu_strategy(tpu):
    _check_tensorflow_build(tpu)
    if tpu and tpu.startswith("grpc://"):
        _check_reachable(tpu)
    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu)
        if tpu != "local":  # a TPU VM's own chips need no remote connection
            tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
    except (ValueError, RuntimeError, ImportError, OSError, tf.errors.OpError) as e:
        raise explain_tpu_error(tpu, e) from e
    logger.info("TPU %s: %s", tpu, tf.config.list_logical_devices("TPU"))
    return tf.distribute.TPUStrategy(resolver)


def input_iterator(strategy, dataset_fn):
    """An iterator over `dataset_fn(input_context)`'s per-replica batches, for
    `strategy.run(step, args=(next(iterator),))` inside a `tf.function`.

    A `OneDeviceStrategy` reads the dataset directly. tf.distribute's own iterator would wrap it
    in a `MultiDeviceIterator`, whose deletion waits for the tf.data autotuning thread's next
    wake-up (TF 2.21; the thread sleeps up to a minute between tunings): a 100-step
    `run_pretraining` ended 35 s after its last evaluation that way, 1.2 s reading directly
    (2 vCPU AMD EPYC). A one-device step needs nothing from the wrapper. Either way the
    dataset runs `without_autotuning`: with autotuning, deleting its iterator sometimes waits
    for up to a minute. (The `MultiDeviceIterator`'s per-device datasets keep TensorFlow's
    options, autotuning included: a multi-replica run may still wait at its end.)

    Example:
        >>> iterator = input_iterator(strategy, lambda context: training_dataset(
        ...     files, 256, 128, 20, context))
    """
    def untuned_dataset(context):
        return without_autotuning(dataset_fn(context))

    if isinstance(strategy, tf.distribute.OneDeviceStrategy):
        return iter(untuned_dataset(tf.distribute.InputContext()))
    return iter(strategy.distribute_datasets_from_function(untuned_dataset))


def is_chief(strategy):
    """Whether this process writes checkpoints and summaries (worker 0 of a multi-worker job,
    else always)."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy) or resolver is None:
        return True
    task_type, task_id = resolver.task_type, resolver.task_id
    return task_type is None or task_type == "chief" or (
        task_type == "worker" and task_id == 0
        and "chief" not in resolver.cluster_spec().as_dict())


def worker_id(strategy):
    """This process's index among the workers (0 unless multi-worker)."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy) or resolver is None:
        return 0
    return resolver.task_id or 0
