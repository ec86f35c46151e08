"""Requests and clients meant to knock the server over, sent to tools/serve.py serving a BERT
classifier (in-graph tokenization, as users serve it) on 127.0.0.1, or the toy model where small
limits make them cheap: each gets an answer naming its problem, memory stays bounded, and
afterwards a valid request gets exactly its earlier answer. Everything is bounded: payloads of at
most 16 x 10 MB, every call with a deadline."""

import concurrent.futures
import contextlib
import http.client
import json
import logging
import math
import os
import re
import socket
import struct
import time

import grpc
import keras
import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.framework import tensor_pb2, tensor_shape_pb2, types_pb2
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

from bert_tf import BertConfig, BertEncoder
from bert_tf.export import export_encoder, export_task_model
from bert_tf.models.bert_pretrainer import BertPretrainer
from bert_tf.serving import ModelServer, ServerOptions, ServingError, rest_service
from bert_tf.serving.admission import Admission
from tests.export.task_examples import new_task_model
from tests.export.tiny_models import VOCAB, write_vocab
from tests.serving.serve_process import free_port

SEQ_LENGTH = 64
TIMEOUT = 60
TEXTS = ["Hello, unaffable world!", "what a good film"]
TEN_MB = 10 << 20


def start_server(base):
    """`(process, grpc port, REST port)` of tools/serve.py serving the model in `base`."""
    from tests.serving.serve_process import ServeProcess

    rest_port = free_port()
    process = ServeProcess(f"--model_base_path={base}", "--port=0",
                           f"--rest_api_port={rest_port}", "--file_system_poll_wait_seconds=0")
    ready = process.ready()
    assert ready is not None, "".join(process.output)
    return process, int(ready["port"]), rest_port


def serve_tiny_export(tmp_path_factory, name, task, **export_arguments):
    """`(process, grpc port, REST port)` of tools/serve.py serving a tiny `task` export as
    model `name`, until the generator is closed."""
    base = tmp_path_factory.mktemp("models") / name
    keras.utils.set_random_seed(5)
    export_task_model(str(base / "1"), task, new_task_model(task),
                      write_vocab(tmp_path_factory.mktemp("vocab")), do_lower_case=True,
                      **export_arguments)
    served = start_server(base)
    yield served
    served[0].kill()


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """tools/serve.py serving a tiny BERT classifier as model "bert"."""
    yield from serve_tiny_export(tmp_path_factory, "bert", "classifier", seq_length=SEQ_LENGTH,
                                 label_names=["negative", "positive", "neutral"])


@pytest.fixture(scope="module")
def stub(served):
    with grpc.insecure_channel(f"127.0.0.1:{served[1]}", options=[
            ("grpc.max_send_message_length", -1)]) as channel:
        yield prediction_service_pb2_grpc.PredictionServiceStub(channel)


def predict(stub, proto_inputs, model="bert", signature=""):
    request = predict_pb2.PredictRequest()
    request.model_spec.name = model
    request.model_spec.signature_name = signature
    for name, proto in proto_inputs.items():
        request.inputs[name].CopyFrom(proto)
    return stub.Predict(request, timeout=TIMEOUT)


def probabilities(stub, texts):
    response = predict(stub, {"text": tf.make_tensor_proto(texts)})
    return tf.make_ndarray(response.outputs["probabilities"])


def rss_bytes(pid, field="VmRSS"):
    """The resident memory of process `pid`; `field="VmHWM"` its peak."""
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(rf"{field}:\s+(\d+) kB", f.read())[1]) * 1024


def reset_peak_rss(pid):
    """Makes the peak resident memory (VmHWM) of `pid` its current one (Linux's clear_refs)."""
    with open(f"/proc/{pid}/clear_refs", "w") as f:
        f.write("5")


def raw_http(port, data, read_timeout=TIMEOUT):
    """Sends `data` as it is on a new connection; returns (status, JSON body) of the answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=read_timeout) as connection:
        connection.sendall(data)
        response = http.client.HTTPResponse(connection)
        response.begin()
        assert response.getheader("Content-Type") == "application/json"
        return response.status, json.loads(response.read())


def post(port, path, body, headers=""):
    return raw_http(port, f"POST {path} HTTP/1.1\r\nHost: x\r\n{headers}Content-Length: "
                          f"{len(body)}\r\n\r\n".encode() + body)


def test_a_35_byte_request_claiming_a_gigantic_tensor_is_refused_before_allocating(
        served, stub):
    before = rss_bytes(served[0].process.pid)
    tensor = tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT, tensor_shape=(
        tensor_shape_pb2.TensorShapeProto(dim=[tensor_shape_pb2.TensorShapeProto.Dim(
            size=1 << 30)])))
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "bert"
    request.inputs["text"].CopyFrom(tensor)
    assert request.ByteSize() <= 35
    with pytest.raises(grpc.RpcError) as raised:
        stub.Predict(request, timeout=5)
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert raised.value.details() == (
        "Input 'text' claims shape [1073741824] (1073741824 elements) but holds 0 values in "
        "float_val.")
    # 4 GB were claimed; nothing near that was allocated.
    assert rss_bytes(served[0].process.pid) - before < 64 << 20


def tensor(dtype, dims, **values):
    return tensor_pb2.TensorProto(dtype=dtype, tensor_shape=tensor_shape_pb2.TensorShapeProto(
        dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=d) for d in dims]), **values)


@pytest.mark.parametrize("proto, message", [
    (tensor(types_pb2.DT_STRING, [3], string_val=[b"a"]),
     "Input 'text' claims shape [3] (3 elements) but holds 1 values in string_val."),
    (tensor(types_pb2.DT_STRING, [-1], string_val=[b"a"]),
     "Input 'text' claims shape [-1], with a negative dimension."),
    (tensor(types_pb2.DT_FLOAT, [1 << 20, 1 << 20], tensor_content=b"\0" * 8),
     "Input 'text' claims shape [1048576, 1048576] (1099511627776 elements, 4398046511104 "
     "bytes) but its tensor_content holds 8 bytes."),
    (tensor(types_pb2.DT_VARIANT, [1]),
     "Input 'text' has dtype DT_VARIANT, which a request cannot carry"),
    (tensor(types_pb2.DT_RESOURCE, [1]),
     "Input 'text' has dtype DT_RESOURCE, which a request cannot carry"),
    (tensor(types_pb2.DT_STRING, [1], tensor_content=b"abcd"),
     "Input 'text' holds DT_STRING values in tensor_content"),
    (tensor_pb2.TensorProto(dtype=types_pb2.DT_STRING, tensor_shape=(
        tensor_shape_pb2.TensorShapeProto(unknown_rank=True))),
     "Input 'text' has an unknown rank"),
    (tensor(types_pb2.DT_INT32, [2], int_val=[1, 2]),
     "Input 'text' has dtype DT_INT32 but signature 'serving_default' expects DT_STRING."),
])
def test_malformed_tensors_are_invalid_arguments(stub, proto, message):
    with pytest.raises(grpc.RpcError) as raised:
        predict(stub, {"text": proto})
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert message in raised.value.details()


def test_sixteen_concurrent_10_mb_texts_leave_memory_bounded_and_answers_unchanged(served,
                                                                                    stub):
    expected = probabilities(stub, TEXTS)
    before = rss_bytes(served[0].process.pid)
    # Each text is 10 MB of words; the model reads its first 64 tokens.
    text = ("a good film, " * (TEN_MB // 13 + 1))[:TEN_MB]
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(lambda _: probabilities(stub, [text]), range(16)))
    grown = rss_bytes(served[0].process.pid) - before
    # The cut keeps 32 KiB of each text: a 10 MB text answers as its first 400 bytes do.
    short = probabilities(stub, [text[:400]])
    for answer in answers:
        np.testing.assert_array_equal(answer, short)
    assert grown < 1 << 30, f"RSS grew by {grown / 2**20:.0f} MiB"
    np.testing.assert_array_equal(probabilities(stub, TEXTS), expected)


@pytest.mark.parametrize("request_bytes, status, message", [
    (b"POST /v1/models/bert/versions/" + b"9" * 5000 + b":predict HTTP/1.1\r\nContent-Length: "
     b"2\r\n\r\n{}", 400, "is not a valid model version (a non-negative int64)"),
    (b"POST /v1/models/bert:predict HTTP/1.1\r\nContent-Length: " + b"9" * 5000 + b"\r\n\r\n",
     413, "is larger than --max_request_bytes"),
    (b"POST /v1/models/bert:predict HTTP/1.1\r\nContent-Length: -5\r\n\r\n", 400,
     "Content-Length must be a number of bytes, got \"-5\"."),
    ("POST /v1/models/bert:predict HTTP/1.1\r\nContent-Length: ²\r\n\r\n".encode(), 400,
     "Content-Length must be a number of bytes"),
    (b"POST /v1/models/bert:predict HTTP/1.1\r\n\r\n", 400,
     "A POST needs a Content-Length header."),
    (b"POST /v1/models/bert:predict HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 400,
     'Transfer-Encoding "gzip, chunked" is not supported'),
    (b"POST /v1/models/bert:predict HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 2"
     b"\r\n\r\n2\r\n{}\r\n0\r\n\r\n", 400, "both Transfer-Encoding and Content-Length"),
    (b"POST /v1/models/bert:predict HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n-2\r\n{}\r\n",
     400, 'Chunk size must be hexadecimal digits, got "-2".'),
    (b"POST /v1/models/bert:predict HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n 2\r\n{}\r\n",
     400, 'Chunk size must be hexadecimal digits, got " 2".'),
    (b"POST /v1/models/bert:predict HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n"
     b"0\r\n\r\n", 400, "Transfer-Encoding is not HTTP/1.0"),
    (b"POST /v1/models/bert:predict HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}XX0"
     b"\r\n\r\n", 400, "A chunk must end with CRLF."),
    (b"POST /v1/models/bert:predict HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
     + b"0" * 5000 + b"1\r\n", 400, "A chunk-size line is longer than 4096 bytes."),
    # A chunk claiming 16 EB: refused before any of it is read.
    (b"POST /v1/models/bert:predict HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
     b"ffffffffffffffff\r\n", 413, "is larger than --max_request_bytes"),
    (b"PUT /v1/models/bert:predict HTTP/1.1\r\nContent-Length: 0\r\n\r\n", 405,
     "Method PUT is not allowed; this API answers GET, POST."),
    (b"DELETE /v1/models/bert HTTP/1.1\r\n\r\n", 405, "Method DELETE is not allowed"),
    (b"BREW /v1/models/bert HTTP/1.1\r\n\r\n", 405, "Method BREW is not allowed"),
    (b"HELLO\r\n\r\n", 400, "Bad Request: Bad request syntax ('HELLO')"),
    (b"GET /v1/models/bert HTTP/7.0\r\n\r\n", 400, "Invalid HTTP version (7.0)"),
    (b"GET /v1/models/bert HTTP/1.1\r\nX-Long: " + b"a" * 70000 + b"\r\n\r\n", 400,
     "Line too long"),
    (b"GET /" + b"a" * 70000 + b" HTTP/1.1\r\n\r\n", 400, "Request-URI Too Long"),
])
def test_malformed_http_is_answered_with_its_problem(served, request_bytes, status, message):
    answer_status, answer = raw_http(served[2], request_bytes)
    assert (answer_status, message in answer["error"]) == (status, True), answer


@pytest.mark.parametrize("body, message", [
    (b'{"instances": [' + b"7" * 5000 + b"]}", "JSON Parse error: Exceeds the limit"),
    (b'{"instances": ' + b"[" * 900 + b'"a"' + b"]" * 900 + b"}",
     "Input 'text' nests lists more than 32 deep"),
    (b'{"instances": ' + b"[" * 100000 + b"]" * 100000 + b"}", "JSON Parse error"),
    (b'{"examples": [{"text": {"b64": "***"}}]}', "holds a 'b64' value that is not valid"),
])
def test_hostile_json_is_answered_with_its_problem(served, body, message):
    method = "classify" if b"examples" in body else "predict"
    status, answer = post(served[2], f"/v1/models/bert:{method}", body)
    assert (status, message in answer["error"]) == (400, True), answer


def test_conflicting_content_lengths_are_refused(served):
    # Answered by the first one, as before, the second would frame another request.
    body = json.dumps({"instances": TEXTS}).encode()
    status, answer = post(served[2], "/v1/models/bert:predict", body,
                          headers=f"Content-Length: {len(body) + 9}\r\n")
    assert (status, answer["error"]) == (400, (
        f'The request has 2 Content-Length headers ("{len(body) + 9}", "{len(body)}"); send '
        f'exactly one.'))


def test_a_chunked_body_is_answered_as_the_same_body_with_a_content_length(served, stub):
    """What clients streaming a body of unknown size send (TF Serving reads it): chunks,
    extensions and trailers; the connection then carries the next request."""
    body = json.dumps({"instances": TEXTS}).encode()
    chunks = [body[:7], body[7:8], body[8:]]
    chunked = b"".join(b"%x;note=x\r\n%s\r\n" % (len(chunk), chunk) for chunk in chunks)
    request = (b"POST /v1/models/bert:predict HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: "
               b"Chunked\r\n\r\n" + chunked + b"0\r\nX-Checksum: none\r\n\r\n")
    with socket.create_connection(("127.0.0.1", served[2]), timeout=TIMEOUT) as connection:
        answers = []
        for _ in range(2):
            connection.sendall(request)
            response = http.client.HTTPResponse(connection)
            response.begin()
            answers.append((response.status, json.loads(response.read())))
    assert answers[0] == answers[1] == post(served[2], "/v1/models/bert:predict", body)
    assert answers[0][0] == 200
    np.testing.assert_allclose([row["probabilities"] for row in answers[0][1]["predictions"]],
                               probabilities(stub, TEXTS), atol=1e-6)


def test_query_strings_are_ignored(served, stub):
    body = json.dumps({"instances": TEXTS}).encode()
    status, answer = post(served[2], "/v1/models/bert:predict?x=1&version=7", body)
    assert status == 200
    np.testing.assert_allclose([row["probabilities"] for row in answer["predictions"]],
                               probabilities(stub, TEXTS), atol=1e-6)
    assert raw_http(served[2], b"GET /v1/models/bert?debug=1 HTTP/1.1\r\n\r\n")[0] == 200


def test_classify_and_regress_routes_answer_like_tf_serving(served, stub):
    status, answer = post(served[2], "/v1/models/bert:classify", json.dumps(
        {"examples": [{"text": t} for t in TEXTS]}).encode())
    assert status == 200
    assert [[label for label, _ in row] for row in answer["results"]] == [
        ["negative", "positive", "neutral"]] * 2
    status, answer = post(served[2], "/v1/models/bert:regress", json.dumps(
        {"examples": [{"text": "a"}]}).encode())
    assert (status, answer["error"]) == (400, (
        "Signature 'serving_default' cannot serve Regress: it must take exactly one input "
        "'inputs' (serialized tf.Example), but it takes {text}; the request names no signature "
        "and none of this model's has method name tensorflow/serving/regress."))


def test_each_aborted_client_costs_one_log_line(served, stub):
    process = served[0]
    before = len(process.output)
    for _ in range(3):
        # A body cut short, then gone: the worker's read ends early.
        with socket.create_connection(("127.0.0.1", served[2]), timeout=TIMEOUT) as connection:
            connection.sendall(b"POST /v1/models/bert:predict HTTP/1.1\r\nContent-Length: "
                               b"1000\r\n\r\n{\"instances\"")
            connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    # The server still answers, and every abort was logged once, without a traceback.
    np.testing.assert_array_equal(probabilities(stub, TEXTS), probabilities(stub, TEXTS))
    process.drain()
    logged = "".join(process.output[before:])
    assert logged.count("REST connection from 127.0.0.1 ended") == 3, logged
    assert "Traceback" not in logged


def test_the_listen_backlog_takes_a_burst_of_clients(served):
    listening = os.popen(f"ss -ltnH 'sport = :{served[2]}'").read().split()
    # ss shows a listening socket's backlog as its Send-Q (the third column).
    assert int(listening[2]) >= 128, listening


@contextlib.contextmanager
def toy_server(toy_base_path, idle_timeout=rest_service.IDLE_TIMEOUT_SECONDS, **options):
    """A ModelServer serving the toy model in this process on free ports, with `options` and
    REST connections closed after `idle_timeout` seconds without progress."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(rest_service, "IDLE_TIMEOUT_SECONDS", idle_timeout)
        server = ModelServer(ServerOptions(model_base_path=toy_base_path, port=0,
                                           rest_api_port=0, file_system_poll_wait_seconds=0,
                                           **options))
        server.start()
    try:
        yield server
    finally:
        server.stop()


def fill_body(width, rows=1):
    """A REST predict body asking the toy's `fill` for `rows` rows of `width` floats."""
    return json.dumps({"signature_name": "fill",
                       "inputs": {"x": [1.0] * rows, "width": [width] * rows}}).encode()


def fill_request(width, rows=1):
    body = fill_body(width, rows)
    return (f"POST /v1/models/toy:predict HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}"
            f"\r\n\r\n").encode() + body


def grpc_fill(port, width):
    with grpc.insecure_channel(f"127.0.0.1:{port}", options=[
            ("grpc.max_receive_message_length", -1)]) as channel:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        return predict(stub, {"x": tf.make_tensor_proto([1.0]),
                              "width": tf.make_tensor_proto([width])},
                       model="toy", signature="fill")


def test_an_answer_beyond_the_budget_is_refused_before_it_is_written(toy_base_path):
    # An 8.7 KB request for an encoder's MLM logits was answered with 338 MB of JSON, growing
    # the server from 738 MB to 2.4 GB; nothing counted the answer.
    with toy_server(toy_base_path, max_request_bytes=64 << 10,
                    max_inflight_request_bytes=1 << 20) as server:
        port = server.rest_api_port
        status, answer = post(port, "/v1/models/toy:predict", fill_body(100_000))
        assert status == 503
        # 25 bytes a float: its longest text and ", ".
        match = re.fullmatch(
            r"The server cannot hold this answer as JSON \(y \[1, 100000\] DT_FLOAT\): it "
            r"needs (\d+) bytes, more than the 1048576 that requests in progress may hold "
            r"together \(--max_inflight_request_bytes\); ask for less, or raise that flag\.",
            answer["error"])
        assert match and 2_500_000 < int(match[1]) < 2_510_000, answer

        with pytest.raises(grpc.RpcError) as raised:
            grpc_fill(server.port, 300_000)
        assert raised.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        match = re.fullmatch(
            r"The server cannot hold this answer \(a PredictResponse\): it needs (\d+) bytes, "
            r"more than the 1048576 .*", raised.value.details())
        assert match and 1_200_000 < int(match[1]) < 1_201_000, raised.value.details()

        # Answers that fit are answered, each giving its bytes back once sent: three in a row
        # of over a third of the budget each.
        for _ in range(3):
            status, answer = post(port, "/v1/models/toy:predict", fill_body(30_000))
            assert status == 200
            np.testing.assert_array_equal(np.array(answer["outputs"], np.float32),
                                          [1 / np.arange(1, 30_001, dtype=np.float32)])
            wait_until_given_back(server.admission)
            response = grpc_fill(server.port, 100_000)
            assert tf.make_ndarray(response.outputs["y"]).shape == (1, 100_000)
            wait_until_given_back(server.admission)


def wait_until_given_back(admission, timeout_seconds=30):
    """Asserts that every request and answer gives its bytes back. The server gives an answer's
    back once it is written (REST) or once the RPC has ended (gRPC), which can be just after the
    client has read it: a REST request sent at once found the last gRPC answer's 400 KB still
    held on a loaded machine and was refused as busy."""
    deadline = time.monotonic() + timeout_seconds
    while admission.held and time.monotonic() < deadline:
        time.sleep(0.01)
    assert admission.held == 0, f"{admission.held} bytes never given back"


def test_a_large_answer_costs_the_server_about_its_size(serve_process, toy_base_path):
    port = free_port()
    process = serve_process(f"--model_base_path={toy_base_path}", "--port=0",
                            f"--rest_api_port={port}", "--file_system_poll_wait_seconds=0",
                            f"--max_inflight_request_bytes={64 << 20}")
    assert process.ready() is not None, "".join(process.output)
    pid = process.process.pid
    status, _ = post(port, "/v1/models/toy:predict", fill_body(1000))  # warm up
    assert status == 200

    # A million floats that fit: 20.5 MB of JSON, which used to be built from 32 MB of Python
    # floats, then a str, then bytes (peak +92 MiB); written in pieces, +41 MiB.
    reset_peak_rss(pid)
    before = rss_bytes(pid)
    status, answer = post(port, "/v1/models/toy:predict", fill_body(1_000_000))
    assert status == 200 and len(answer["outputs"][0]) == 1_000_000
    peak = rss_bytes(pid, "VmHWM") - before
    assert peak < 64 << 20, f"peak RSS grew by {peak / 2**20:.0f} MiB"

    # 8 rows of a million floats: 32 MB of tensor, up to 200 MB of JSON. Written, it grew the
    # server by 852 MiB; refused, by the tensor and the model's own work (59 MiB).
    reset_peak_rss(pid)
    before = rss_bytes(pid)
    status, answer = post(port, "/v1/models/toy:predict", fill_body(1_000_000, rows=8))
    assert (status, "The server cannot hold this answer as JSON" in answer["error"]) == (
        503, True), answer
    peak = rss_bytes(pid, "VmHWM") - before
    assert peak < 160 << 20, f"peak RSS grew by {peak / 2**20:.0f} MiB"


def read_answer_slowly(connection, request, block=32 << 10, pause=0.025):
    """Sends `request`, then reads its answer `block` bytes every `pause` seconds;
    `(Content-Length, bytes of body received)`."""
    connection.sendall(request)
    response = http.client.HTTPResponse(connection)
    response.begin()
    length = int(response.getheader("Content-Length"))
    received = b""
    try:
        while len(received) < length and (chunk := response.read(block)):
            received += chunk
            time.sleep(pause)
    except (OSError, http.client.IncompleteRead):
        pass
    return length, received


def slow_client(port):
    """A connection to `port` with a small receive buffer, so that the server waits for it."""
    connection = socket.socket()
    connection.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 10)
    connection.settimeout(TIMEOUT)
    connection.connect(("127.0.0.1", port))
    return connection


def test_a_slow_reader_gets_the_whole_answer(toy_base_path):
    # A client reading 300 KB/s got 6.8 of 7.3 MB: the idle timeout bounded the whole send.
    with toy_server(toy_base_path, idle_timeout=2) as server:
        with slow_client(server.rest_api_port) as connection:
            # ~9.4 MB read at ~1.2 MB/s: ~4 s beyond what the socket buffers hold (~4 MB),
            # several idle timeouts, each with progress.
            length, body = read_answer_slowly(connection, fill_request(400_000))
    assert len(body) == length
    assert len(json.loads(body)["outputs"][0]) == 400_000


def test_an_answer_the_client_stops_reading_is_cut_off_logged_and_given_back(toy_base_path,
                                                                             caplog):
    caplog.set_level(logging.WARNING)
    with toy_server(toy_base_path, idle_timeout=6, max_request_bytes=64 << 10,
                    max_inflight_request_bytes=16 << 20) as server:
        port = server.rest_api_port
        with slow_client(port) as stalled:
            # ~8 MB: more than the socket buffers hold, so the server waits for the client.
            stalled.sendall(fill_request(400_000))
            stalled.recv(1)
            # The stalled answer holds its bytes of the budget while it waits.
            status, answer = post(port, "/v1/models/toy:predict", fill_body(400_000))
            assert (status, answer["error"].startswith(
                "The server is busy: requests in progress hold ")) == (503, True), answer
            deadline = time.monotonic() + TIMEOUT
            while "cut off" not in caplog.text and time.monotonic() < deadline:
                time.sleep(0.1)
        assert re.search(r"REST answer to 127\.0\.0\.1 cut off after \d+ of its \d+ bytes: "
                         r"TimeoutError: timed out", caplog.text), caplog.text
        wait_until_given_back(server.admission)  # logged just before its bytes go back
        status, answer = post(port, "/v1/models/toy:predict", fill_body(400_000))
        assert status == 200


def closed_by_server(connections, count=0):
    """Those of `connections` the server has closed, in their order, once there are at least
    `count` (a bounded wait)."""
    deadline = time.monotonic() + TIMEOUT
    while True:
        closed = []
        for connection in connections:
            connection.setblocking(False)
            try:
                if connection.recv(1, socket.MSG_PEEK) == b"":
                    closed.append(connection)
            except BlockingIOError:
                pass
        if len(closed) >= count or time.monotonic() > deadline:
            return closed
        time.sleep(0.1)


@contextlib.contextmanager
def open_connections(port, count):
    """`count` connections to the REST port on 127.0.0.1, closed after the block."""
    connections = [socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
                   for _ in range(count)]
    try:
        yield connections
    finally:
        for connection in connections:
            connection.close()


def test_idle_connections_hold_no_worker(toy_base_path):
    # 24 workers, up to 124 connections. Each idle connection held a worker until its idle
    # timeout: behind 100 of them a request waited 16.5 s.
    with toy_server(toy_base_path, max_batch_size=8, max_queued_requests=100) as server:
        with open_connections(server.rest_api_port, 100) as idle:
            start = time.monotonic()
            status, _ = raw_http(server.rest_api_port, b"GET /v1/models/toy HTTP/1.1\r\n\r\n")
            waited = time.monotonic() - start
            assert status == 200
            assert waited < rest_service.IDLE_TIMEOUT_SECONDS / 2, f"waited {waited:.1f} s"
            assert closed_by_server(idle) == []  # served without closing any


def test_the_longest_idle_connections_make_room_for_new_ones(toy_base_path):
    with toy_server(toy_base_path, max_batch_size=1, max_queued_requests=2) as server:
        most = server.options.num_request_threads + server.options.max_queued_requests
        with open_connections(server.rest_api_port, 40) as idle:
            status, _ = raw_http(server.rest_api_port, b"GET /v1/models/toy HTTP/1.1\r\n\r\n")
            assert status == 200
            # At most `most` connections were open at once: each one more closed the oldest.
            closed = closed_by_server(idle, 40 - most + 1)
            assert closed == idle[:40 - most + 1]


def test_connections_beyond_the_busy_workers_and_queue_get_503_at_once(toy_base_path):
    with toy_server(toy_base_path, max_batch_size=1, max_queued_requests=2) as server:
        most = server.options.num_request_threads + server.options.max_queued_requests
        # Clients stalled in the middle of their requests hold every worker and queue slot.
        with open_connections(server.rest_api_port, most) as stalled:
            for connection in stalled:
                connection.sendall(b"POST /v1/models/toy:predict HTTP/1.1\r\nContent-Length: "
                                   b"1000\r\n\r\n{\"instances\"")
            start = time.monotonic()
            status, answer = raw_http(server.rest_api_port,
                                      b"GET /v1/models/toy HTTP/1.1\r\n\r\n")
            assert (status, answer["error"]) == (503, "The server is busy: every worker and "
                                                      "queue slot is taken; retry shortly.")
            assert time.monotonic() - start < rest_service.IDLE_TIMEOUT_SECONDS / 2
        # Slots free up as the workers see the stalled clients go (within seconds at most).
        for _ in range(300):
            if raw_http(server.rest_api_port, b"GET /v1/models/toy HTTP/1.1\r\n\r\n")[0] == 200:
                break
            time.sleep(0.1)
        else:
            pytest.fail("the REST server never recovered from being full")


def test_request_and_answer_data_beyond_the_budget_is_resource_exhausted():
    admission = Admission(max_bytes=100)
    with admission.admit(60, "this request"):
        with pytest.raises(ServingError) as raised:
            with admission.admit(41, "this answer"):
                pass
        assert raised.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert raised.value.http_status == 503
        assert str(raised.value) == (
            "The server is busy: requests in progress hold 60 of its 100 bytes for requests "
            "and answers and this answer needs 41; retry shortly.")
        release = admission.take(40, "this answer")
        assert admission.held == 100
    assert admission.held == 40  # the request's 60 given back, the answer's 40 still held
    release()
    assert admission.held == 0
    with admission.admit(100, "this request"):
        pass
    with pytest.raises(ServingError) as raised:
        admission.take(101, "this answer")
    assert str(raised.value) == (
        "The server cannot hold this answer: it needs 101 bytes, more than the 100 that "
        "requests in progress may hold together (--max_inflight_request_bytes); ask for less, "
        "or raise that flag.")


@pytest.fixture(scope="module")
def served_choices(tmp_path_factory):
    """tools/serve.py serving a tiny multiple-choice export as model "choices"."""
    yield from serve_tiny_export(tmp_path_factory, "choices", "multiple_choice", seq_length=32)


def test_a_multiple_choice_request_counts_a_sequence_per_choice(served_choices):
    def ask(choices):
        body = json.dumps({"instances": [{"context": "what is the film", "choices": choices}]})
        return post(served_choices[2], "/v1/models/choices:predict", body.encode())

    # One row of 20,000 choices once ran for 220 s (MiniLM) and kept 8 GB of the server's
    # memory: each choice is a sequence, and --max_batch_size (32) bounds them.
    assert ask(["a good film"] * 20000) == (400, {"error": (
        "Input 'choices' holds 20000 strings (shape [1, 20000]): the model runs a sequence per "
        "string, at most 32 in one call (--max_batch_size); split the request.")})
    assert ask([]) == (400, {"error": "Input 'choices' has shape [1, 0], which holds no values; "
                                      "send at least one per row."})
    status, answer = ask(["good"] * 32)
    assert status == 200 and len(answer["predictions"][0]["probabilities"]) == 32


ENCODER_INPUTS = ("input_word_ids", "input_mask", "input_type_ids")
MILLION = 1_000_000


@pytest.fixture(scope="module")
def served_encoder(tmp_path_factory):
    """`(process, stub)` of tools/serve.py serving an encoder export with its MLM head: one
    layer of hidden size 128, 64 positions."""
    base = tmp_path_factory.mktemp("models") / "encoder"
    keras.utils.set_random_seed(5)
    config = BertConfig(vocab_size=len(VOCAB), hidden_size=128, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=64, max_position_embeddings=64)
    export_encoder(str(base / "1"), BertPretrainer(BertEncoder(config)),
                   write_vocab(tmp_path_factory.mktemp("vocab")), do_lower_case=True)
    process, port, _ = start_server(base)
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        yield process, prediction_service_pb2_grpc.PredictionServiceStub(channel)
    process.kill()


def zeros(*dims):
    """An int32 tensor of zeros as `int_val`: a byte per element on the wire."""
    return tensor(types_pb2.DT_INT32, dims, int_val=[0] * math.prod(dims))


@pytest.mark.parametrize("signature, shapes, message", [
    ("serving_default", {name: [1, MILLION] for name in ENCODER_INPUTS},
     "Sequence length exceeds max_position_embeddings"),
    ("mlm", {**{name: [1, 8] for name in ENCODER_INPUTS}, "masked_lm_positions": [1, MILLION]},
     "masked_lm_positions holds more positions per row than input_word_ids has tokens"),
])
def test_encoder_requests_beyond_the_model_are_refused_before_it_allocates(
        served_encoder, signature, shapes, message):
    process, stub = served_encoder
    pid = process.process.pid
    reset_peak_rss(pid)
    before = rss_bytes(pid)
    with pytest.raises(grpc.RpcError) as raised:
        predict(stub, {name: zeros(*shape) for name, shape in shapes.items()}, model="encoder",
                signature=signature)
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert message in raised.value.details()
    # The request's arrays take 12 MB a copy (80 MB at the peak); a million tokens' (or
    # predictions') 128 floats are 512 MB for each of the model's first ops.
    peak = rss_bytes(pid, "VmHWM") - before
    assert peak < 256 << 20, f"peak RSS grew by {peak / 2**20:.0f} MiB"
    answer = predict(stub, {name: zeros(1, 8) for name in ENCODER_INPUTS}, model="encoder")
    assert tf.make_ndarray(answer.outputs["sequence_output"]).shape == (1, 8, 128)
