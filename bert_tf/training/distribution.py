"""Building the `tf.distribute` strategy named by `--strategy`.

Example:
    >>> strategy = create_strategy("mirrored")          # every GPU, else every logical CPU
    >>> strategy = create_strategy("tpu", tpu="grpc://10.2.3.4:8470")
"""

import logging
import socket
import urllib.parse

import tensorflow as tf

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
        raise TpuUnavailableError(f"--tpu={address}: expected grpc://HOST:PORT")
    try:
        with socket.create_connection((parsed.hostname, parsed.port),
                                      timeout=TPU_CONNECT_TIMEOUT_SECONDS):
            pass
    except OSError as e:
        raise TpuUnavailableError(
            f"Cannot reach the TPU worker at {address} (--tpu): {e}. Check the address and "
            f"that the TPU is running and reachable from this machine.") from e


def _tpu_strategy(tpu):
    if tpu and tpu.startswith("grpc://"):
        _check_reachable(tpu)
    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu)
        if tpu != "local":  # a TPU VM's own chips need no remote connection
            tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
    except (ValueError, RuntimeError, ImportError, OSError, tf.errors.OpError) as e:
        raise TpuUnavailableError(
            f"Cannot use the TPU {tpu if tpu else '(none given, none detected)'} (--tpu): "
            f"{e}") from e
    logger.info("TPU %s: %s", tpu, tf.config.list_logical_devices("TPU"))
    return tf.distribute.TPUStrategy(resolver)


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
