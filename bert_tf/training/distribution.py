"""Building the `tf.distribute` strategy named by `--strategy`.

Example:
    >>> strategy = create_strategy("mirrored")          # every GPU, else every logical CPU
    >>> strategy = create_strategy("tpu", tpu="grpc://10.2.3.4:8470")
"""

import contextlib
import json
import logging
import os
import re
import signal
import socket
import sys
import threading
import time
import traceback
import urllib.parse

import tensorflow as tf
from tensorflow.python.distribute import multi_worker_util
from tensorflow.python.eager import context

from bert_tf.captured_stderr import CapturedStderr
from bert_tf.data.without_autotuning import without_autotuning
from bert_tf.training import tpu_host
from bert_tf.training.strategy_names import STRATEGIES

logger = logging.getLogger("bert_tf.training")

# How long to wait for a TPU worker's gRPC port before giving up with a clear error.
TPU_CONNECT_TIMEOUT_SECONDS = 10.0

# How long a multi-worker job waits for the other workers of TF_CONFIG's cluster to start (the
# hosts of a cluster start minutes apart), and the variable that changes it.
WORKER_WAIT_VARIABLE = "BERT_TF_WORKER_WAIT_SECONDS"
DEFAULT_WORKER_WAIT_SECONDS = 300
# The jobs whose tasks run the collectives (TensorFlow's coordination service knows only these).
_COORDINATED_JOBS = ("chief", "worker")
# The longest a worker waits for the others at `wait_for_every_worker`: the chief may be writing
# the checkpoint (BERT-large's with its Adam slots is 4 GB) while the others write only their
# small copy. A peer that is gone fails the wait sooner, through the coordination service's
# heartbeats.
_EVERY_WORKER_WAIT_MS = 600_000


class TpuUnavailableError(RuntimeError):
    """The TPU named by `--tpu` cannot be reached or initialised."""


class WorkersMissingError(RuntimeError):
    """Workers of TF_CONFIG's cluster did not all start, or did not all join, within the wait."""


def create_strategy(name, tpu=None, quiet=False):
    """The strategy `name` (one of `STRATEGIES`).

    * `tpu`: `TPUStrategy` on the TPU at `tpu` (`grpc://host:port`, a Cloud TPU name, or
      "local" on a TPU VM; None: TensorFlow's auto-detection, e.g. `$TPU_NAME`).
    * `mirrored`: synchronous data parallelism over this machine's GPUs, or over its logical
      CPU devices when it has none (one, unless `tf.config` split the CPU).
    * `multi_worker_mirrored`: the same across machines; the cluster comes from `$TF_CONFIG`.
      It waits up to `$BERT_TF_WORKER_WAIT_SECONDS` (default 300) for the other workers.
    * `one_device`: the first GPU, else the CPU. `cpu`: the CPU even when there are GPUs.

    With `quiet`, TensorFlow's error lines about workers that never joined, or about a TPU it
    cannot use, stay off stderr: the `WorkersMissingError` or `TpuUnavailableError` says it.

    Call it before running any TensorFlow op: a multi-worker strategy configures TensorFlow's
    collective ops, which only works before the runtime starts.
    """
    if name == "tpu":
        return _tpu_strategy(tpu, quiet)
    if tpu:
        raise ValueError(f"--tpu={tpu} is only used with --strategy=tpu, not {name}")
    if name == "multi_worker_mirrored":  # first: listing devices would start the runtime
        return _multi_worker_strategy(quiet)
    gpus = [d.name for d in tf.config.list_logical_devices("GPU")]
    if name == "mirrored":
        return tf.distribute.MirroredStrategy(
            gpus or [d.name for d in tf.config.list_logical_devices("CPU")])
    if name == "one_device":
        return tf.distribute.OneDeviceStrategy(gpus[0] if gpus else "/cpu:0")
    if name == "cpu":
        return tf.distribute.OneDeviceStrategy("/cpu:0")
    raise ValueError(f"Unknown strategy {name!r}; choose one of {', '.join(STRATEGIES)}")


def _multi_worker_strategy(quiet):
    """`MultiWorkerMirroredStrategy` on TF_CONFIG's cluster, once every worker has started.

    TensorFlow's own wait for the other workers, in the strategy's constructor, cannot be
    interrupted: it runs in C++ holding the GIL (no Python signal handler runs) and replaces
    the SIGTERM handler with its preemption notice, which only records the signal; and its
    leader (worker 0) waits with no bound (TF 2.21: over 10 minutes for a worker that never
    came). So the waiting happens here first, in Python, for a bounded time; TensorFlow's own
    registration gets the same bound in case a worker dies in between.
    """
    _check_tf_config()
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    cluster = multi_worker_util.normalize_cluster_spec(resolver.cluster_spec())
    if (resolver.task_type not in _COORDINATED_JOBS
            or context.context().coordination_service is not None):
        # One machine, an evaluator, or a coordination service the caller configured.
        return tf.distribute.MultiWorkerMirroredStrategy(resolver)
    seconds = _worker_wait_seconds()
    _wait_for_other_workers(cluster, resolver.task_type, resolver.task_id, seconds)
    # What MultiWorkerMirroredStrategy configures itself when nothing is, plus the bound.
    context.context().configure_coordination_service(
        service_type="standalone", service_leader=multi_worker_util.coordination_leader(cluster),
        cluster_register_timeout_in_ms=int(seconds * 1000))
    coordination = context.context().coordination_service
    for job in _COORDINATED_JOBS:
        if job in cluster.jobs:
            coordination.coordinated_job_list.add(name=job, num_tasks=cluster.num_tasks(job))
    # Without the barrier, the service's leader waits for the others with no bound.
    coordination.cluster_register_with_barrier = True
    with _terminable_while_tensorflow_connects(), _kept_back_unless_explained(quiet):
        try:
            return tf.distribute.MultiWorkerMirroredStrategy(resolver)
        except (tf.errors.DeadlineExceededError, tf.errors.UnavailableError) as e:
            not_joined = _not_joined(cluster, e.message)
            # The runtime that failed to join lives on in the frames of the error's traceback;
            # deleting it logs the failure once more (its coordination agent's shutdown): now,
            # inside _kept_back_unless_explained, rather than after the tool's one-line error.
            traceback.clear_frames(e.__traceback__)
            raise _workers_missing(not_joined, seconds) from e


_TF_CONFIG_EXAMPLE = ('TF_CONFIG=\'{"cluster": {"worker": ["host1:port", "host2:port"]}, '
                      '"task": {"type": "worker", "index": 0}}\'')


def _check_tf_config():
    """Raises ValueError naming TF_CONFIG for what TensorFlow would read wrong or say without
    naming it ("Expecting value: line 1 column 13", "No task with index 3 in job 'worker'"),
    and warns when there is none: the process then trains alone, which a job meant for
    several machines should hear of."""
    text = os.environ.get("TF_CONFIG", "")
    if not text.strip():
        logger.warning("--strategy=multi_worker_mirrored without TF_CONFIG: this process trains "
                       "alone; each worker of a cluster needs its TF_CONFIG, e.g. %s",
                       _TF_CONFIG_EXAMPLE)
        return
    try:
        config = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"TF_CONFIG is not valid JSON ({error.msg} at character {error.pos}); "
                         f"expected e.g. {_TF_CONFIG_EXAMPLE}") from None
    cluster = config.get("cluster") if isinstance(config, dict) else None
    if not cluster or not isinstance(cluster, dict):
        raise ValueError(f"TF_CONFIG has no \"cluster\" of workers; expected e.g. "
                         f"{_TF_CONFIG_EXAMPLE}")
    task = config.get("task")
    if not isinstance(task, dict) or "type" not in task or "index" not in task:
        raise ValueError(f"TF_CONFIG has no \"task\" {{\"type\": ..., \"index\": ...}} saying "
                         f"which of its cluster's tasks this process is; expected e.g. "
                         f"{_TF_CONFIG_EXAMPLE}")
    if task["type"] == "evaluator":  # evaluates beside the cluster, not in it
        return
    tasks = cluster.get(task["type"])
    count = len(tasks) if isinstance(tasks, (list, dict)) else 0
    index = task["index"]
    if not (isinstance(index, int) and 0 <= index < count):
        raise ValueError(f"TF_CONFIG's task {task['type']!r} {index!r} is not in its cluster, "
                         f"whose {task['type']!r} job has {count} task(s)"
                         + (f" (indexes 0 to {count - 1})" if count else ""))


@contextlib.contextmanager
def _kept_back_unless_explained(quiet):
    """With `quiet`, what TensorFlow prints meanwhile is kept back, then shown unless a
    `WorkersMissingError` or `TpuUnavailableError` ends the block: its one line says what they
    say (TF 2.21: ~30 lines of C++ errors and gRPC details about a multi-worker registration
    that timed out, some at once, some when the runtime is deleted; gRPC's errors about a TPU
    address). The lines of a strategy that started, or of another failure, are all shown."""
    if not quiet:
        yield
        return
    captured, shown = CapturedStderr(), True
    try:
        with captured:
            yield
    except (WorkersMissingError, TpuUnavailableError):
        shown = False
        raise
    finally:
        if shown:
            sys.stderr.write(captured.text)
            sys.stderr.flush()


def _not_joined(cluster, message):
    """What TensorFlow's `message` about a failed registration says of the absent workers."""
    # The leader's message lists the tasks that never registered, one a line, after these
    # words (then other tasks, in the gRPC details); a worker's names none.
    listed = re.match(r"(\s*/job:\w+/replica:\d+/task:\d+)*",
                      message.partition("timed out task names:")[2]).group(0)
    tasks = re.findall(r"/job:(\w+)/replica:\d+/task:(\d+)", listed)
    # What else explains a port that answers but a task that never joins.
    causes = "another program may hold the port, or the run there failed or hung before joining"
    if tasks:
        return (", ".join(f"{job} {index} at {cluster.task_address(job, int(index))}"
                          for job, index in tasks)
                + f" accepted connections but did not join ({causes}: see its output)")
    # A worker's message names the task it registers with, the leader, in its gRPC details.
    reason = message.strip().splitlines()[0][:200]
    leader = re.search(r"remote target /job:(\w+)/replica:\d+/task:(\d+)", message)
    if not leader:
        return f"this worker could not join them ({reason})"
    job, index = leader.group(1), int(leader.group(2))
    return (f"{job} {index} at {cluster.task_address(job, index)}, the leader the others "
            f"register with, did not answer this worker's registration ({reason}; {causes}: "
            f"see its output)")


def _worker_wait_seconds():
    value = os.environ.get(WORKER_WAIT_VARIABLE, "")
    if not value:
        return DEFAULT_WORKER_WAIT_SECONDS
    try:
        seconds = float(value)
    except ValueError:
        seconds = 0
    if not seconds > 0:
        raise ValueError(f"{WORKER_WAIT_VARIABLE}={value}: expected a number of seconds above 0")
    return seconds


def _workers_missing(what, seconds):
    return WorkersMissingError(
        f"The other workers of TF_CONFIG's cluster did not all start within {seconds:g} s: "
        f"{what}. Fix: run the same command on every host of the cluster, each with its own "
        f"task index in TF_CONFIG, and check the addresses and that this host reaches them; "
        f"{WORKER_WAIT_VARIABLE} sets the wait in seconds")


def _host_and_port(address):
    parsed = urllib.parse.urlsplit("//" + address)  # "host:port" or "[v6 address]:port"
    return parsed.hostname, parsed.port


def _wait_for_other_workers(cluster, task_type, task_id, seconds):
    """Returns once every other chief and worker task of `cluster` (a `ClusterSpec`) accepts
    connections at its address; raises a WorkersMissingError naming those that do not after
    `seconds`. Meanwhile this task's own port accepts connections, so that the others see it
    (TensorFlow's server opens it only once it waits for them itself)."""
    own_address = cluster.task_address(task_type, task_id)
    try:
        listener = socket.create_server(("", _host_and_port(own_address)[1]))
    except OSError as e:
        raise RuntimeError(f"This worker cannot listen at its address {own_address} "
                           f"(TF_CONFIG: task {task_type} {task_id}): {e}. Fix: end what holds "
                           f"the port, or give the task a free port on every host") from e
    missing = {f"{job} {index} at {cluster.task_address(job, index)}":
               cluster.task_address(job, index)
               for job in _COORDINATED_JOBS if job in cluster.jobs
               for index in cluster.task_indices(job) if (job, index) != (task_type, task_id)}
    deadline = time.monotonic() + seconds
    with listener:
        missing = _not_answering(missing)
        if missing:
            logger.info("Waiting up to %g s for the other workers of TF_CONFIG's cluster: %s "
                        "(%s sets the wait)", seconds, ", ".join(missing), WORKER_WAIT_VARIABLE)
        while missing:
            if time.monotonic() >= deadline:
                raise _workers_missing(f"no answer from {', '.join(missing)}", seconds)
            time.sleep(0.5)
            missing = _not_answering(missing)


def _not_answering(addresses):
    """The items of `addresses` ({name: "host:port"}) where nothing accepts connections."""
    missing = {}
    for name, address in addresses.items():
        try:
            _connect(*_host_and_port(address), timeout=1)
        except OSError:
            missing[name] = address
    return missing


def _connect(host, port, timeout):
    """Opens and closes a TCP connection to `host`:`port`; OSError if nothing accepts it."""
    with socket.create_connection((host, port), timeout=timeout):
        pass


@contextlib.contextmanager
def _terminable_while_tensorflow_connects():
    """While TensorFlow connects to the other workers (C++ holding the GIL), SIGINT ends the
    process at once and SIGTERM waits, blocked, for the end of the call; then SIGTERM gets its
    handler back from TensorFlow's preemption notice, which would only record it."""
    if threading.current_thread() is not threading.main_thread():  # signals are the main's
        yield
        return
    interrupt, terminate = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL if terminate is None else terminate)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
        signal.signal(signal.SIGINT, signal.SIG_DFL if interrupt is None else interrupt)


def _check_reachable(address):
    # TensorFlow retries an unreachable gRPC worker for minutes, and waits without end on a
    # port that answers in another protocol (an HTTP server: still waiting after 300 s). A TCP
    # connect says "nobody there" in milliseconds (refused) or after the timeout (unroutable);
    # HTTP/2's opening exchange, which gRPC begins with, tells a gRPC server from others.
    parsed = urllib.parse.urlparse(address)
    if not parsed.hostname or not parsed.port:
        raise TpuUnavailableError(f"--tpu={address}: expected grpc://HOST:PORT (a TPU node's "
                                  f"worker listens on port 8470)")
    try:
        reply = _http2_reply(parsed.hostname, parsed.port, TPU_CONNECT_TIMEOUT_SECONDS)
    except OSError as e:
        raise TpuUnavailableError(
            f"Cannot reach the TPU worker at {address} (--tpu): {e}. Fix: check the address "
            f"and port, that the TPU is running, and that this machine's network reaches it.") \
            from e
    if len(reply) < 9 or reply[3] != _HTTP2_SETTINGS:
        first_line = reply.splitlines()[0][:60].decode("latin-1") if reply else ""
        said = (f"answered {first_line!r}" if reply else
                f"said nothing within {TPU_CONNECT_TIMEOUT_SECONDS:g} s")
        raise TpuUnavailableError(
            f"{address} (--tpu) accepts connections but is no gRPC server: it {said} to the "
            f"opening of a gRPC connection. Fix: check the port (a TPU node's worker listens "
            f"on 8470) and that the TPU is running.")


# HTTP/2's connection preface, then an empty SETTINGS frame (RFC 9113, 3.4): a gRPC server
# answers with a SETTINGS frame of its own, whose 9-byte header has the type at byte 3.
_HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
_HTTP2_SETTINGS = 4


def _http2_reply(host, port, timeout):
    """The first bytes (at least a frame header's 9, unless the server closes or falls silent
    for `timeout` seconds) that `host`:`port` answers HTTP/2's preface with; OSError if nothing
    accepts the connection."""
    reply = b""
    with socket.create_connection((host, port), timeout=timeout) as connection:
        connection.sendall(_HTTP2_PREFACE)
        try:
            while len(reply) < 9 and (chunk := connection.recv(64)):
                reply += chunk
        except (TimeoutError, ConnectionResetError):
            pass
    return reply


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
            f"{tpu_host.LAST_TPU_TENSORFLOW} with README.md's TPU install line, in a fresh "
            f"virtualenv.")
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
    version = tpu_host.tpu_tensorflow_version(tf.__version__)
    # No TPU build of this TensorFlow: a TPU node's runtime cannot match it.
    same_here = "" if version == tf.__version__ else f" and TensorFlow {version} here"
    # Graph and eager wording of the same problem.
    unregistered = re.search(r"Op type not registered '([^']+)'|'([^']+)' is neither a type of a "
                             r"primitive operation nor a name of a function registered", detail)
    if unregistered:
        return TpuUnavailableError(
            f"The TensorFlow running the TPU ({where}) does not know the op "
            f"{unregistered.group(1) or unregistered.group(2)}: it is another version than "
            f"this machine's {tf.__version__}, or has no tensorflow-text. Fix: on a TPU VM, "
            f"tensorflow-tpu {version} (README.md, section TPU); on a TPU node, runtime "
            f"version tpu-vm-tf-{version}{same_here} and --input_file records instead of raw "
            f"text.")
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
        f"running, and that its runtime version is TensorFlow {version}{same_here}.")


def _tpu_strategy(tpu, quiet):
    _check_tensorflow_build(tpu)
    if tpu and tpu.startswith("grpc://"):
        _check_reachable(tpu)
    with _kept_back_unless_explained(quiet):
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


def single_process(strategy):
    """Whether `strategy` trains in this process alone (anything but a MultiWorkerMirrored
    strategy over several workers)."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy) or resolver is None:
        return True
    cluster = resolver.cluster_spec().as_dict()
    return sum(len(cluster.get(job, ())) for job in _COORDINATED_JOBS) <= 1


def wait_for_every_worker(strategy, point):
    """Returns once every worker of `strategy`'s multi-worker job has reached `point` (a name
    unique in the job's run), at once in a single process.

    A worker that leaves the job (exits) must first wait for the others: a collective's receiver
    pulls the data from its sender, so a worker whose last collective has completed may still
    be read from, and its exit would fail the reader's collective with UNAVAILABLE instead of
    letting it finish. A wait that fails (a peer is gone: at once for the chief, after the
    heartbeat timeout for another worker; or 10 minutes passed) is logged: the worker leaves
    anyway.

    Example:
        >>> manager.save(checkpoint_number=step)
        >>> wait_for_every_worker(strategy, f"saved step {step}")
        >>> raise TrainingTerminated(...)
    """
    if single_process(strategy):
        return
    try:
        context.context().wait_at_barrier(f"bert_tf: {point}", _EVERY_WORKER_WAIT_MS)
    except tf.errors.OpError as error:
        logger.warning("Leaving without waiting for every worker to reach %s: %s", point,
                       " ".join(error.message.split()))
