"""A multi-worker job (`--strategy=multi_worker_mirrored`) whose other workers start late or
never, run as a user runs it: tools/run_pretraining.py in subprocesses, a two-worker TF_CONFIG
on loopback (bert_tf/training/distribution.py waits for the workers); and which of TensorFlow's
lines it shows meanwhile."""

import contextlib
import json
import os
import queue
import signal
import socket
import subprocess
import threading

import pytest

from bert_tf.training import distribution
from tests.data.pretraining.records import write_pretraining_records
from tests.tools.test_run_pretraining import CONFIG
from tests.tools.tool_runs import tool_command, tool_env
from tests.training.test_distributed import free_port

WAITING = "Waiting up to"
FIX = ("Fix: run the same command on every host of the cluster, each with its own task index in "
       "TF_CONFIG, and check the addresses and that this host reaches them; "
       "BERT_TF_WORKER_WAIT_SECONDS sets the wait in seconds\n")
# The causes the error names for a port that answers while its task never joins.
CAUSES = "another program may hold the port, or the run there failed or hung before joining"
# "At once" for a worker's exit on a signal: far below the 300-s wait it would otherwise sit
# out, and above the 5 s one took on a machine loaded with twice its cores' work.
AT_ONCE_SECONDS = 60


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    directory = tmp_path_factory.mktemp("data")
    write_pretraining_records(directory / "train.tfrecord", 48, 16, 3, vocab_size=40, seed=1)
    (directory / "bert_config.json").write_text(json.dumps(CONFIG))
    return directory


def start_worker(index, addresses, data, output_dir, *flags, env=None):
    """Worker `index` of the cluster `addresses`, training a tiny model for a long time (with
    `flags` too); the returned process's `lines` queue gets its stderr line by line, then None
    at its end."""
    tf_config = {"cluster": {"worker": addresses}, "task": {"type": "worker", "index": index}}
    worker = subprocess.Popen(
        tool_command("run_pretraining.py", f"--bert_config_file={data / 'bert_config.json'}",
                     f"--input_file={data / 'train.tfrecord'}", f"--output_dir={output_dir}",
                     "--train_batch_size=8", "--num_train_steps=100000", "--steps_per_execution=1",
                     "--save_checkpoints_steps=100000", "--strategy=multi_worker_mirrored",
                     "--nojit_compile", *flags),
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env=tool_env({"TF_CONFIG": json.dumps(tf_config), **(env or {})}))
    worker.lines = queue.Queue()
    threading.Thread(target=lambda: [*map(worker.lines.put, worker.stderr),
                                     worker.lines.put(None)], daemon=True).start()
    return worker


def lines_until(worker, text, timeout=180):
    """The lines `worker` writes to stderr up to the first holding `text` (failing if it ends
    or `timeout` seconds pass first)."""
    lines = []
    while not lines or text not in lines[-1]:
        try:
            line = worker.lines.get(timeout=timeout)
        except queue.Empty:
            pytest.fail(f"no {text!r} on stderr within {timeout} s: {''.join(lines)}")
        assert line is not None, f"the worker ended before {text!r}: {''.join(lines)}"
        lines.append(line)
    return lines


def all_lines(worker):
    """Every line an ended `worker` wrote to stderr."""
    lines = []
    while (line := worker.lines.get(timeout=10)) is not None:
        lines.append(line)
    return lines


@pytest.fixture
def workers():
    started = []
    yield started
    for worker in started:
        if worker.poll() is None:
            worker.kill()
            worker.wait()


def test_a_worker_whose_peer_never_starts_ends_with_one_line_after_the_wait(data, tmp_path,
                                                                           workers):
    addresses = [f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"]
    worker = start_worker(0, addresses, data, tmp_path / "out",
                          env={"BERT_TF_WORKER_WAIT_SECONDS": "3"})
    workers.append(worker)
    assert worker.wait(timeout=180) == 1
    lines = lines_until(worker, "run_pretraining: error:", timeout=10)
    assert len(lines) == 2, lines
    assert (f"{WAITING} 3 s for the other workers of TF_CONFIG's cluster: worker 1 at "
            f"{addresses[1]} (BERT_TF_WORKER_WAIT_SECONDS sets the wait)") in lines[0]
    assert lines[1] == (
        f"run_pretraining: error: The other workers of TF_CONFIG's cluster did not all start "
        f"within 3 s: no answer from worker 1 at {addresses[1]}. Fix: run the same command on "
        f"every host of the cluster, each with its own task index in TF_CONFIG, and check the "
        f"addresses and that this host reaches them; BERT_TF_WORKER_WAIT_SECONDS sets the wait "
        f"in seconds\n")
    assert not (tmp_path / "out").exists()


def run_beside_an_impostor(impostor_index, data, tmp_path, workers, *flags):
    """All that the other worker of a two-worker cluster writes to stderr when another program
    holds worker `impostor_index`'s port: the first wait passes, TensorFlow's gets the bound."""
    with socket.create_server(("127.0.0.1", 0)) as impostor:
        addresses = [f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"]
        addresses[impostor_index] = f"127.0.0.1:{impostor.getsockname()[1]}"
        worker = start_worker(1 - impostor_index, addresses, data, tmp_path / "out", *flags,
                              env={"BERT_TF_WORKER_WAIT_SECONDS": "3"})
        workers.append(worker)
        assert worker.wait(timeout=180) == 1
    assert not (tmp_path / "out").exists()
    return addresses[impostor_index], all_lines(worker)


def test_a_peer_that_answers_but_never_joins_is_named_in_one_line(data, tmp_path, workers):
    # TensorFlow 2.21 logged 29 lines of C++ errors around this one, the last at exit.
    address, lines = run_beside_an_impostor(1, data, tmp_path, workers)
    assert lines == [
        f"run_pretraining: error: The other workers of TF_CONFIG's cluster did not all start "
        f"within 3 s: worker 1 at {address} accepted connections but did not join ({CAUSES}: "
        f"see its output). {FIX}"]


def test_a_leader_that_answers_but_never_joins_is_named_in_one_line(data, tmp_path, workers):
    # Worker 1 registers with worker 0, the leader: only TensorFlow's gRPC details named it.
    address, lines = run_beside_an_impostor(0, data, tmp_path, workers)
    assert lines == [
        f"run_pretraining: error: The other workers of TF_CONFIG's cluster did not all start "
        f"within 3 s: worker 0 at {address}, the leader the others register with, did not "
        f"answer this worker's registration (Deadline Exceeded; {CAUSES}: see its output). "
        f"{FIX}"]


def test_verbosity_1_shows_tensorflows_lines_about_a_peer_that_never_joins(data, tmp_path,
                                                                           workers):
    _, lines = run_beside_an_impostor(1, data, tmp_path, workers, "--verbosity=1")
    stderr = "".join(lines)
    assert "coordination_service.cc" in stderr and "Barrier timed out" in stderr, stderr
    assert lines[-1].startswith("run_pretraining: error: The other workers"), stderr


@pytest.mark.parametrize("error", [None, ValueError("another failure")])
def test_what_tensorflow_prints_otherwise_is_shown(capfd, error):
    # A cluster that joined, or failed in another way, keeps every line TensorFlow printed.
    with pytest.raises(type(error)) if error else contextlib.nullcontext():
        with distribution._kept_back_unless_explained(quiet=True):
            os.write(2, b"E0000 00:00:1.0 1 x.cc:1] a real problem\n")
            if error:
                raise error
    assert capfd.readouterr().err == "E0000 00:00:1.0 1 x.cc:1] a real problem\n"


@pytest.mark.parametrize("error", [distribution.WorkersMissingError("worker 1 did not join"),
                                   distribution.TpuUnavailableError("no gRPC server")])
def test_what_tensorflow_prints_about_an_explained_failure_is_kept_back_when_quiet(capfd, error):
    for quiet in (True, False):
        with pytest.raises(type(error)):
            with distribution._kept_back_unless_explained(quiet):
                os.write(2, b"E0000 00:00:1.0 1 x.cc:1] Barrier timed out\n")
                raise error
    assert capfd.readouterr().err == "E0000 00:00:1.0 1 x.cc:1] Barrier timed out\n"


def test_a_wait_that_is_not_a_number_of_seconds_is_named(data, tmp_path, workers):
    addresses = [f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"]
    worker = start_worker(0, addresses, data, tmp_path / "out",
                          env={"BERT_TF_WORKER_WAIT_SECONDS": "soon"})
    workers.append(worker)
    assert worker.wait(timeout=180) == 1
    assert lines_until(worker, "error:", timeout=10) == [
        "run_pretraining: error: BERT_TF_WORKER_WAIT_SECONDS=soon: expected a number of seconds "
        "above 0\n"]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_ends_a_waiting_worker_at_once(data, tmp_path, workers, signum):
    addresses = [f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"]
    worker = start_worker(0, addresses, data, tmp_path / "out")
    workers.append(worker)
    lines_until(worker, WAITING)
    worker.send_signal(signum)
    assert worker.wait(timeout=AT_ONCE_SECONDS) == -signum


def test_a_late_worker_joins_and_sigterm_ends_the_training_workers(data, tmp_path, workers):
    addresses = [f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"]
    workers.append(start_worker(0, addresses, data, tmp_path / "out"))
    lines_until(workers[0], f"{WAITING} 300 s")  # the default wait
    workers.append(start_worker(1, addresses, data, tmp_path / "out"))
    for worker in workers:
        lines_until(worker, "on 2 replica(s) (--strategy=multi_worker_mirrored)")
    # TensorFlow's preemption notice took SIGTERM over while the workers connected.
    for worker in workers:
        worker.send_signal(signal.SIGTERM)
    for worker in workers:
        assert worker.wait(timeout=AT_ONCE_SECONDS) == -signal.SIGTERM
