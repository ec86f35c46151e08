"""tools/serve.py in its own process, for the serving benches: the server, its gRPC and REST
clients, and what the process holds in memory.

Example:
    server = Server("/tmp/models/sst2", "sst2", ["--max_batch_size=32"])
    client = GrpcClient(server.port, "sst2")
    outputs, status = client.predict({"text": np.array([b"a gripping film"], object)})
    peak = process_memory_bytes(server.process.pid, "VmHWM")
    server.stop()
"""

import base64
import http.client
import json
import os
import queue
import re
import socket
import subprocess
import sys
import threading
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CALL_TIMEOUT = 120
STARTUP_SECONDS = 300


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def process_memory_bytes(pid, field):
    """A memory field of /proc/<pid>/status in bytes: "VmRSS" (resident now), "VmHWM" (the
    resident peak so far)."""
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(rf"{field}:\s+(\d+) kB", f.read())[1]) * 1024


class Server:
    """tools/serve.py in a subprocess, found through its ready line."""

    READY = re.compile(r"gRPC at 127\.0\.0\.1:(\d+), REST at http://127\.0\.0\.1:(\d+)")

    def __init__(self, base_path, model_name, batching_flags):
        rest_port = free_port()
        self.process = subprocess.Popen(
            [sys.executable, os.path.join(REPO_ROOT, "tools", "serve.py"),
             f"--model_base_path={base_path}", f"--model_name={model_name}", "--port=0",
             f"--rest_api_port={rest_port}", *batching_flags,
             "--file_system_poll_wait_seconds=0"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
        lines = queue.Queue()
        threading.Thread(target=lambda: [lines.put(line) for line in self.process.stdout],
                         daemon=True).start()
        deadline = time.monotonic() + STARTUP_SECONDS
        while True:
            line = lines.get(timeout=max(1.0, deadline - time.monotonic()))
            match = self.READY.search(line)
            if match:
                self.port, self.rest_port = int(match[1]), int(match[2])
                return

    def stop(self):
        self.process.terminate()
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=30)


class GrpcClient:
    """Predict over the official stubs; returns (outputs, None) or (None, status name)."""

    def __init__(self, port, model_name, timeout=CALL_TIMEOUT):
        import grpc
        from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc
        self._grpc, self._predict_pb2 = grpc, predict_pb2
        self._channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        self._stub = prediction_service_pb2_grpc.PredictionServiceStub(self._channel)
        self.model_name = model_name
        self.timeout = timeout

    def predict(self, inputs, model_name=None, version=None):
        import tensorflow as tf
        request = self._predict_pb2.PredictRequest()
        request.model_spec.name = model_name or self.model_name
        if version is not None:
            request.model_spec.version.value = version
        for name, value in inputs.items():
            request.inputs[name].CopyFrom(tf.make_tensor_proto(value))
        try:
            response = self._stub.Predict(request, timeout=self.timeout)
        except self._grpc.RpcError as error:
            return None, error.code().name
        return {name: tf.make_ndarray(proto) for name, proto in response.outputs.items()}, None

    def close(self):
        self._channel.close()


class RestClient:
    """POST :predict in row format over one kept-alive connection; same results as GrpcClient."""

    STATUS_NAMES = {400: "INVALID_ARGUMENT", 404: "NOT_FOUND"}

    def __init__(self, port, model_name):
        self._connection = http.client.HTTPConnection("127.0.0.1", port, timeout=CALL_TIMEOUT)
        self.model_name = model_name

    def predict(self, inputs, model_name=None, version=None):
        import numpy as np
        path = f"/v1/models/{model_name or self.model_name}"
        path += f"/versions/{version}:predict" if version is not None else ":predict"
        ((name, value),) = inputs.items()
        rows = [_json_value(v) for v in np.asarray(value, dtype=object).tolist()]
        self._connection.request("POST", path, body=json.dumps({"instances": [
            {name: row} for row in rows]} if name != "text" else {"instances": rows}))
        response = self._connection.getresponse()
        body = json.loads(response.read())
        if response.status != 200:
            return None, self.STATUS_NAMES.get(response.status, f"HTTP {response.status}")
        predictions = body["predictions"]
        return {key: np.array([row[key] for row in predictions]) for key in predictions[0]}, None

    def close(self):
        self._connection.close()


def _json_value(value):
    if isinstance(value, bytes):
        return {"b64": base64.b64encode(value).decode()}
    return value
