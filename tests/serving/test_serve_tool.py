"""tools/serve.py as a user runs it: a separate process, found through the line it prints,
answering the official stubs and REST, shutting down cleanly on SIGTERM. (Importing TensorFlow
makes each process slow to start, so the in-process tests cover the option variants.)"""

import http.client
import json
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading

import grpc
import pytest
import tensorflow as tf
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

from tests.resources import REPO_ROOT

SERVE = os.path.join(REPO_ROOT, "tools", "serve.py")
STARTUP_SECONDS = 120
READY_LINE = re.compile(r"Serving model '(?P<name>[^']+)' from .*: gRPC at 127\.0\.0\.1:"
                        r"(?P<port>\d+), (?:REST at http://127\.0\.0\.1:(?P<rest>\d+)|REST off)")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServeProcess:
    """tools/serve.py in a subprocess; `ready()` waits (bounded) for its ready line."""

    def __init__(self, *flags):
        self.process = subprocess.Popen(
            [sys.executable, SERVE, *flags], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
        self.lines = queue.Queue()
        self.output = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.process.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def ready(self):
        while True:
            line = self.lines.get(timeout=STARTUP_SECONDS)
            if line is None:
                return None
            self.output.append(line)
            match = READY_LINE.search(line)
            if match:
                return match

    def finish(self, timeout=60):
        """Waits for the exit; returns (exit code, everything the process printed)."""
        code = self.process.wait(timeout=timeout)
        while (line := self.lines.get(timeout=timeout)) is not None:
            self.output.append(line)
        return code, "".join(self.output)

    def kill(self):
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)


@pytest.fixture
def serve_process():
    processes = []

    def start(*flags):
        process = ServeProcess(*flags)
        processes.append(process)
        return process

    yield start
    for process in processes:
        process.kill()


def test_serves_grpc_and_rest_then_stops_on_sigterm(serve_process, toy_base_path):
    rest_port = free_port()
    process = serve_process(f"--model_base_path={toy_base_path}", "--model_name=movies",
                            "--port=0", f"--rest_api_port={rest_port}", "--max_batch_size=4",
                            "--file_system_poll_wait_seconds=0")
    ready = process.ready()
    assert ready is not None, "".join(process.output)
    assert ready["name"] == "movies" and int(ready["rest"]) == rest_port

    with grpc.insecure_channel(f"127.0.0.1:{ready['port']}") as channel:
        request = predict_pb2.PredictRequest()
        request.model_spec.name = "movies"
        request.inputs["text"].CopyFrom(tf.make_tensor_proto(["héllo"]))
        response = prediction_service_pb2_grpc.PredictionServiceStub(channel).Predict(
            request, timeout=30)
    assert tf.make_ndarray(response.outputs["length"]).tolist() == [5]

    connection = http.client.HTTPConnection("127.0.0.1", rest_port, timeout=30)
    connection.request("POST", "/v1/models/movies:predict",
                       body=json.dumps({"instances": ["a"] * 5}))
    answer = connection.getresponse()
    assert answer.status == 400  # --max_batch_size=4 reached the server
    assert "larger than the maximum batch size 4" in json.loads(answer.read())["error"]
    connection.close()

    process.process.send_signal(signal.SIGTERM)
    code, output = process.finish()
    assert code == 0, output
