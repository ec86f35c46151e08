import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.training import distribution
from bert_tf.training.distribution import create_strategy, input_iterator
from bert_tf.training.tpu_host import tpu_tensorflow_version
from tests.data.pretraining.records import write_pretraining_records
from tests.resources import REPO_ROOT
from tests.tools.tool_runs import run_tool
from tests.training.test_pretraining_trainer import PREDICTIONS, SEQ


def free_port():
    """A local TCP port nobody listens on (now)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_mirrored_over_two_cpus_matches_one_device_for_the_same_global_batch(tmp_path):
    records = str(tmp_path / "train.tfrecord")
    write_pretraining_records(records, 48, SEQ, PREDICTIONS, vocab_size=40)
    output = str(tmp_path / "states.npz")
    script = os.path.join(REPO_ROOT, "tests", "training", "two_cpu_replicas.py")
    subprocess.run([sys.executable, script, records, output], check=True, timeout=600)
    states = np.load(output)
    assert int(states["replicas"]) == 2
    # Every step is clipped, so clipping per replica (instead of the summed gradient) or summing
    # twice would show in the weights and in Adam's moments.
    assert float(states["gradient_norm"]) > 4 * float(states["clip_norm"])
    np.testing.assert_allclose(states["mirrored_totals"], states["one_device_totals"], rtol=1e-5)
    count = sum(1 for key in states if key.startswith("one_device_") and key[11:].isdigit())
    assert count > 20
    for i in range(count):
        np.testing.assert_allclose(states[f"mirrored_{i}"], states[f"one_device_{i}"], rtol=2e-4,
                                   atol=1e-6, err_msg=f"variable {i}")


def test_strategies_by_name():
    assert isinstance(create_strategy("cpu"), tf.distribute.OneDeviceStrategy)
    assert create_strategy("one_device").num_replicas_in_sync == 1
    assert isinstance(create_strategy("mirrored"), tf.distribute.MirroredStrategy)
    with pytest.raises(ValueError, match="Unknown strategy 'gpu'; choose one of tpu, mirrored"):
        create_strategy("gpu")
    with pytest.raises(ValueError, match="--tpu=grpc://1.2.3.4:8470 is only used with "
                                         "--strategy=tpu"):
        create_strategy("mirrored", tpu="grpc://1.2.3.4:8470")


@pytest.mark.parametrize("name", ["cpu", "mirrored"])
def test_input_iterator_feeds_strategy_run_with_the_dataset_batches(name):
    strategy = create_strategy(name)
    contexts = []

    def dataset_fn(context):
        contexts.append((context.num_input_pipelines, context.input_pipeline_id,
                         context.num_replicas_in_sync))
        return tf.data.Dataset.range(12).batch(3)

    iterator = input_iterator(strategy, dataset_fn)
    # One device reads the dataset itself; tf.distribute's iterator would wrap it (see the
    # docstring); a mirrored strategy keeps tf.distribute's.
    assert isinstance(iterator, tf.distribute.DistributedIterator) == (name == "mirrored")
    assert contexts == [(1, 0, 1)]
    # And without tf.data's autotuning, whose iterators' deletion can wait up to a minute
    # (`without_autotuning`); the datasets are read from the iterators' own attributes.
    read = ([iterator._dataset] if name == "cpu"
            else [worker._dataset for worker in iterator._iterators])
    assert [dataset.options().autotune.enabled for dataset in read] == [False]

    @tf.function
    def sums(iterator):
        totals = []
        for _ in range(4):
            per_replica = strategy.run(tf.reduce_sum, args=(next(iterator),))
            totals.append(strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None))
        return tf.stack(totals)

    np.testing.assert_array_equal(sums(iterator).numpy(), [3, 12, 21, 30])


def run_tpu_failures(*ways):
    """{way: (error type, message)} of `tpu_failures.py` run on `ways` in a fresh process."""
    script = os.path.join(REPO_ROOT, "tests", "training", "tpu_failures.py")
    result = subprocess.run([sys.executable, script, *ways], capture_output=True, text=True,
                            timeout=300, cwd=REPO_ROOT)
    assert result.returncode == 0, result.stderr[-3000:]
    outcomes = dict(line.split("\t", 1) for line in result.stdout.splitlines())
    assert sorted(outcomes) == sorted(ways), result.stdout
    return {way: tuple(outcome.split("\t", 1)) for way, outcome in outcomes.items()}


@pytest.fixture
def cpu_worker():
    """The address of a TensorFlow gRPC worker on loopback: a machine without TPU (and
    without tensorflow-text's ops), where a TPU node's worker would listen."""
    port = free_port()
    worker = subprocess.Popen([sys.executable, "-c", (
        "import tensorflow as tf; tf.distribute.Server(tf.train.ClusterSpec({'worker': "
        f"['127.0.0.1:{port}']}}), job_name='worker', task_index=0).join()")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):  # TensorFlow's import takes a few seconds
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert worker.poll() is None, "the gRPC worker died"
            time.sleep(0.1)
        yield f"grpc://127.0.0.1:{port}"
    finally:
        worker.kill()
        worker.wait()


def assert_one_line_naming(outcome, error_type, *phrases):
    found_type, message = outcome
    assert found_type == error_type, outcome
    assert "\n" not in message and "Traceback" not in message, message
    assert "Fix:" in message or "expected grpc://" in message, message
    for phrase in phrases:
        assert phrase in message, (phrase, message)


def test_every_tpu_problem_is_one_line_naming_cause_and_fix():
    port = free_port()
    closed = f"grpc://127.0.0.1:{port}"
    outcomes = run_tpu_failures("local", "local_on_tpu_build", "two_builds", "none", closed,
                                "grpc://no-port", "my-tpu")
    # This environment's TensorFlow is the plain `tensorflow` build (no TPU kernels).
    assert_one_line_naming(outcomes["local"], "TpuUnavailableError", "has no TPU support",
                           "install tensorflow-tpu 2.20")
    assert_one_line_naming(outcomes["local_on_tpu_build"], "TpuUnavailableError",
                           "No TPU found on this machine (--tpu=local)", "/dev/accel*",
                           "--strategy=mirrored")
    assert_one_line_naming(outcomes["two_builds"], "TpuUnavailableError",
                           "Several TensorFlow distributions are installed (tensorflow, "
                           "tensorflow-tpu)", "fresh virtualenv")
    assert_one_line_naming(outcomes["none"], "TpuUnavailableError",
                           "No TPU given and none detected", "--tpu=local")
    assert_one_line_naming(outcomes[closed], "TpuUnavailableError",
                           f"Cannot reach the TPU worker at {closed} (--tpu)", "refused")
    assert_one_line_naming(outcomes["grpc://no-port"], "TpuUnavailableError",
                           "--tpu=grpc://no-port: expected grpc://HOST:PORT")
    # A name is looked up on Google Cloud, which this machine is not.
    assert_one_line_naming(outcomes["my-tpu"], "TpuUnavailableError",
                           "Cannot look up the TPU named my-tpu (--tpu)", "--tpu=grpc://IP:8470")


@contextlib.contextmanager
def listener(answer):
    """The address of a loopback port whose server accepts connections and sends `answer` to
    each (nothing if empty, then holds the connection open)."""
    server = socket.create_server(("127.0.0.1", 0))
    held = []

    def serve():
        while True:
            try:
                connection, _ = server.accept()
            except OSError:  # the server closed
                return
            held.append(connection)
            if answer:
                connection.sendall(answer)

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield f"grpc://127.0.0.1:{server.getsockname()[1]}"
    finally:
        server.close()
        for connection in held:
            connection.close()


def test_a_port_that_is_no_grpc_server_is_one_line_not_a_wait_without_end():
    # TensorFlow waited without end on both (an HTTP server: still waiting after 300 s).
    http_answer = b"HTTP/1.0 400 Bad request version ('HTTP/2.0')\r\n\r\n"
    with listener(http_answer) as http, listener(b"") as silent:
        outcomes = run_tpu_failures(http, silent)
    assert_one_line_naming(outcomes[http], "TpuUnavailableError",
                           f"{http} (--tpu) accepts connections but is no gRPC server: it "
                           f"answered \"HTTP/1.0 400 Bad request version ('HTTP/2.0')\"",
                           "listens on 8470")
    assert_one_line_naming(outcomes[silent], "TpuUnavailableError",
                           f"{silent} (--tpu) accepts connections but is no gRPC server: it "
                           f"said nothing within 10 s")


def test_a_worker_without_tpu_or_without_an_op_is_one_line_naming_cause_and_fix(cpu_worker):
    outcomes = run_tpu_failures(cpu_worker, f"unregistered_op={cpu_worker}")
    assert_one_line_naming(outcomes[cpu_worker], "TpuUnavailableError",
                           f"No TPU found (--tpu={cpu_worker})", "TPU_SYSTEM")
    assert_one_line_naming(outcomes[f"unregistered_op={cpu_worker}"], "TpuUnavailableError",
                           "does not know the op NormalizeUTF8", "tensorflow-text",
                           "--input_file records instead of raw text",
                           f"tensorflow-tpu {tpu_tensorflow_version(tf.__version__)} ",
                           f"runtime version tpu-vm-tf-{tpu_tensorflow_version(tf.__version__)}")


def tool_error_lines(result):
    """The tool's own lines on stderr (TensorFlow 2.21 logs a few C++ lines before its logging
    is set up, whatever TF_CPP_MIN_LOG_LEVEL says)."""
    assert "Traceback" not in result.stderr, result.stderr
    return [line for line in result.stderr.splitlines() if line.startswith("run_pretraining:")]


def test_the_tool_says_a_tpu_problem_in_one_line_without_traceback(tmp_path):
    records = str(tmp_path / "train.tfrecord")
    write_pretraining_records(records, 8, SEQ, PREDICTIONS, vocab_size=40)
    # Nothing named: the one line says what a TPU job needs, before anything else runs.
    result = run_tool("run_pretraining.py", "--strategy=tpu", "--tpu=local", timeout=300)
    assert result.returncode != 0 and result.stdout == "", result.stdout
    [line] = tool_error_lines(result)
    assert line.startswith("run_pretraining: error: a TPU job (--strategy=tpu) needs its inputs "
                           "named: --input_file or --input_text_file"), line
    assert "embedded default job runs on this machine only" in line
    # Inputs named, on this environment's TensorFlow (no TPU kernels): exit 1, one line.
    result = run_tool("run_pretraining.py", "--strategy=tpu", "--tpu=local",
                      f"--input_file={records}", "--bert_config_file=" + os.path.join(
                          REPO_ROOT, "official_configs", "bert_tiny.json"),
                      f"--output_dir={tmp_path / 'run'}", timeout=300)
    assert result.returncode == 1 and result.stdout == "", result.stdout
    assert tool_error_lines(result) == [
        f"run_pretraining: error: This TensorFlow (tensorflow {tf.__version__}) has no TPU "
        f"support, which --tpu=local needs. Fix: on the TPU VM, install tensorflow-tpu 2.20 with "
        f"README.md's TPU install line, in a fresh virtualenv."], result.stderr


@pytest.mark.parametrize("tf_config, message", [
    ('{"cluster": {"worker": ["a:1", "b:2"]}, "task": ', "TF_CONFIG is not valid JSON "
     "(Expecting value at character 48); expected e.g. TF_CONFIG="),
    ("[]", 'TF_CONFIG has no "cluster" of workers; expected e.g. TF_CONFIG='),
    ('{"cluster": {"worker": ["a:1", "b:2"]}}', 'TF_CONFIG has no "task" {"type": ..., '
     '"index": ...} saying which of its cluster\'s tasks this process is'),
    ('{"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", "index": 3}}',
     "TF_CONFIG's task 'worker' 3 is not in its cluster, whose 'worker' job has 2 task(s) "
     "(indexes 0 to 1)"),
    ('{"cluster": {"worker": ["a:1"]}, "task": {"type": "chief", "index": 0}}',
     "TF_CONFIG's task 'chief' 0 is not in its cluster, whose 'chief' job has 0 task(s)"),
])
def test_a_tf_config_tensorflow_would_misread_is_named(monkeypatch, tf_config, message):
    # TensorFlow said "Expecting value: line 1 column 13 (char 12)" or "No task with index 3 in
    # job 'worker'", naming no TF_CONFIG; "[]" trained one worker without a word.
    monkeypatch.setenv("TF_CONFIG", tf_config)
    with pytest.raises(ValueError) as error:
        create_strategy("multi_worker_mirrored")
    assert str(error.value).startswith(message), str(error.value)


def test_multi_worker_without_tf_config_warns_that_it_trains_alone(monkeypatch, caplog):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    distribution._check_tf_config()
    [record] = caplog.records
    assert record.levelname == "WARNING" and record.getMessage().startswith(
        "--strategy=multi_worker_mirrored without TF_CONFIG: this process trains alone")


def two_worker_tf_configs():
    """The TF_CONFIG values of worker 0 (the chief) and worker 1 of a two-worker job on
    loopback."""
    cluster = {"worker": [f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"]}
    return [json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})
            for index in (0, 1)]


def run_two_workers(script, *args):
    """(returncode, stdout, stderr) of worker 0 and 1 of a two-worker job on loopback, each
    running `script` with `args`."""
    workers = [subprocess.Popen(
        [sys.executable, script, *args], cwd=REPO_ROOT, text=True, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": REPO_ROOT, "TF_CPP_MIN_LOG_LEVEL": "2",
             "TF_CONFIG": tf_config})
        for tf_config in two_worker_tf_configs()]
    try:
        outputs = [worker.communicate(timeout=300) for worker in workers]
        return [(worker.returncode, *output) for worker, output in zip(workers, outputs)]
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()


@pytest.mark.parametrize("mode", ["wait", "leave"])
def test_a_worker_leaves_only_once_every_worker_reached_the_same_point(tmp_path, mode):
    """A worker whose collectives are done may still be read from by another's: leaving early
    would fail the other's collective (UNAVAILABLE). With "leave", worker 1 exits without
    waiting: the chief's wait then ends with a warning instead of hanging."""
    script = os.path.join(REPO_ROOT, "tests", "training", "every_worker_wait.py")
    marker = str(tmp_path / "worker_1_passed")
    (chief_code, chief_out, chief_err), (worker_code, worker_out, worker_err) = run_two_workers(
        script, marker, mode)
    assert chief_code == worker_code == 0, (chief_err, worker_err)
    assert "replicas 2" in chief_out and "replicas 2" in worker_out, (chief_err, worker_err)
    # Worker 1 waited for the chief, which arrived 2 s after it.
    assert "marker before the chief's wait: False" in chief_out, (chief_out, chief_err)
    assert "passed" in chief_out, chief_err
    assert os.path.exists(marker) == (mode == "wait")
    if mode == "leave":
        assert "Leaving without waiting for every worker to reach test: " in chief_err


def test_a_signal_during_the_stop_vote_stops_no_worker_alone():
    """A SIGTERM arriving while the workers vote counts at the next vote: the worker that got it
    stopped at once while the others trained on (their next collective then waited for it)."""
    script = os.path.join(REPO_ROOT, "tests", "training", "stop_vote.py")
    outputs = run_two_workers(script)
    for code, stdout, stderr in outputs:
        assert code == 0, stderr
        assert "decided: None" in stdout, (stdout, stderr)
