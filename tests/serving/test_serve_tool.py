"""tools/serve.py as a user runs it: a separate process, found through the line it prints,
answering the official stubs and REST, shutting down cleanly on SIGTERM. (Importing TensorFlow
makes each process slow to start, so the in-process tests cover the option variants.)"""

import http.client
import json
import os
import re
import signal
import subprocess
import sys

import grpc
import pytest
import tensorflow as tf
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

from tests.serving.serve_process import SERVE, free_port


def test_serves_grpc_and_rest_then_stops_on_sigterm(serve_process, toy_base_path):
    rest_port = free_port()
    process = serve_process(f"--model_base_path={toy_base_path}", "--model_name=movies",
                            "--port=0", f"--rest_api_port={rest_port}", "--max_batch_size=4",
                            "--num_batch_threads=2", "--tensorflow_intra_op_parallelism=1",
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
    # A server's log lines keep their time (the job tools' read as plain lines instead).
    assert re.search(r"^I\d{4} [\d:.]+ +\d+ model_manager\.py:\d+\] Serving version 1 of "
                     r"model 'movies'$", output, re.MULTILINE), output


@pytest.mark.parametrize("flag", ["--port=70000", "--port=-5", "--rest_api_port=99999"])
def test_a_port_out_of_range_is_refused(flag, toy_base_path):
    # gRPC took --port=70000 as 4464 and --port=-5 as 65531; the REST server raised
    # "OverflowError: bind(): port must be 0-65535." as a bug.
    result = subprocess.run([sys.executable, SERVE, f"--model_base_path={toy_base_path}", flag],
                            capture_output=True, text=True, timeout=120)
    name, value = flag[2:].split("=")
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"serve: error: flag --{name}={value}: {value} is not an integer in the range [0, 65535] "
        "(--helpshort lists the flags)"]


@pytest.mark.parametrize("flags, message", [
    (["--port=18590", "--rest_api_port=18590"],
     "--port and --rest_api_port are both 18590: gRPC and REST need a port each."),
    (["--host=198.51.100.1"],  # an address for documentation (RFC 5737): none of this machine
     "--host 198.51.100.1: not an address of this machine (Cannot assign requested address); "
     "use 127.0.0.1, 0.0.0.0 or an address of one of its interfaces"),
])
def test_an_address_that_cannot_be_served_is_refused_in_one_line_before_loading(
        flags, message, toy_base_path):
    # Both loaded the model first, then printed "[Errno 98] Address already in use" (naming
    # no flag) or a gRPC log line and "Failed to bind ... set GRPC_VERBOSITY=debug".
    result = subprocess.run([sys.executable, SERVE, f"--model_base_path={toy_base_path}",
                             *flags], capture_output=True, text=True, timeout=120,
                            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert result.returncode == 1
    assert result.stderr.splitlines() == [f"serve: error: {message}"]
