"""The REST API over plain HTTP, checked against the SavedModel called directly."""

import base64
import http.client
import json
import socket

import numpy as np
import pytest
import tensorflow as tf
from google.protobuf import json_format
from tensorflow.core.protobuf import saved_model_pb2

from tests.serving.conftest import MAX_BATCH_SIZE, MAX_REQUEST_BYTES

TIMEOUT = 30


def call(server, method, path, body=None, raw=None):
    """(HTTP status, decoded JSON body) of one request; `raw` sends bytes as they are."""
    connection = http.client.HTTPConnection("127.0.0.1", server.rest_api_port, timeout=TIMEOUT)
    try:
        payload = raw if raw is not None else (json.dumps(body).encode() if body is not None
                                               else None)
        connection.request(method, path, body=payload,
                           headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        assert response.getheader("Content-Type") == "application/json"
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def b64(data):
    return {"b64": base64.b64encode(data).decode()}


def expected_default_rows(toy_savedmodel, texts):
    """The SavedModel's serving_default outputs as TF Serving's row-format JSON."""
    outputs = toy_savedmodel.signatures["serving_default"](text=tf.constant(texts))
    rows = []
    for i in range(len(texts)):
        rows.append({"length": int(outputs["length"][i]),
                     "upper": outputs["upper"][i].numpy().decode("utf-8"),
                     "version": int(outputs["version"][i]),
                     # An output named *_bytes is binary: always base64.
                     "text_bytes": b64(outputs["text_bytes"][i].numpy())})
    return rows


def test_model_status(server):
    expected = {"model_version_status": [{"version": "1", "state": "AVAILABLE",
                                          "status": {"error_code": "OK", "error_message": ""}}]}
    assert call(server, "GET", "/v1/models/toy") == (200, expected)
    assert call(server, "GET", "/v1/models/toy/versions/1") == (200, expected)


def test_model_metadata_is_the_savedmodel_signature_defs(server, toy_base_path):
    saved_model = saved_model_pb2.SavedModel()
    with open(f"{toy_base_path}/1/saved_model.pb", "rb") as f:
        saved_model.ParseFromString(f.read())
    signature_defs = {key: json_format.MessageToDict(value, preserving_proto_field_name=True)
                      for key, value in saved_model.meta_graphs[0].signature_def.items()}
    status, body = call(server, "GET", "/v1/models/toy/metadata")
    assert status == 200
    assert body == {"model_spec": {"name": "toy", "signature_name": "", "version": "1"},
                    "metadata": {"signature_def": {"signature_def": signature_defs}}}
    assert call(server, "GET", "/v1/models/toy/versions/1/metadata") == (200, body)


def test_predict_row_format_with_text_and_b64(server, toy_savedmodel):
    texts = ["a fine movie", "héllo", "日本語"]
    instances = [texts[0], {"b64": base64.b64encode(texts[1].encode()).decode()}, texts[2]]
    status, body = call(server, "POST", "/v1/models/toy:predict", {"instances": instances})
    assert status == 200
    assert body == {"predictions": expected_default_rows(toy_savedmodel, texts)}


def test_predict_row_format_objects_and_explicit_version(server, toy_savedmodel):
    status, body = call(server, "POST", "/v1/models/toy/versions/1:predict",
                        {"signature_name": "serving_default",
                         "instances": [{"text": "one"}, {"text": "two"}]})
    assert (status, body) == (200, {"predictions": expected_default_rows(toy_savedmodel,
                                                                         ["one", "two"])})


def expected_scale(toy_savedmodel, x, factor):
    y = toy_savedmodel.signatures["scale"](x=tf.constant(x, tf.float32),
                                           factor=tf.constant(factor, tf.float32))["y"]
    return y.numpy()


def test_predict_columnar_format_with_two_inputs(server, toy_savedmodel):
    x, factor = [[0.1, 2, -3.5], [4, 5, 6]], [0.3, -2]
    status, body = call(server, "POST", "/v1/models/toy:predict",
                        {"signature_name": "scale", "inputs": {"x": x, "factor": factor}})
    assert status == 200
    # One output: "outputs" is the tensor itself. JSON numbers read back as float32 exactly.
    np.testing.assert_array_equal(np.array(body["outputs"], np.float32),
                                  expected_scale(toy_savedmodel, x, factor))


def test_predict_row_format_with_two_inputs(server, toy_savedmodel):
    instances = [{"x": [1, 2, 3], "factor": 0.5}, {"x": [-1, 0.25, 9], "factor": 3}]
    status, body = call(server, "POST", "/v1/models/toy:predict",
                        {"signature_name": "scale", "instances": instances})
    assert status == 200
    expected = expected_scale(toy_savedmodel, [i["x"] for i in instances],
                              [i["factor"] for i in instances])
    # One output: each prediction is that output's row, without its name.
    np.testing.assert_array_equal(np.array(body["predictions"], np.float32), expected)


def test_predict_columnar_format_with_one_input(server, toy_savedmodel):
    status, body = call(server, "POST", "/v1/models/toy:predict", {"inputs": ["ab", "c"]})
    rows = expected_default_rows(toy_savedmodel, ["ab", "c"])
    assert status == 200
    assert body == {"outputs": {name: [row[name] for row in rows] for name in rows[0]}}


BAD_REQUESTS = {
    "wrong input name": (
        {"instances": [{"txt": "a"}]}, 400,
        "Element 0 of 'instances' has keys {txt}; the signature's inputs are {text}."),
    "wrong input name, columnar": (
        {"signature_name": "scale", "inputs": {"x": [[1, 2, 3]], "scale": [1]}}, 400,
        "'inputs' has keys {scale,x}; the signature's inputs are {factor,x}."),
    "wrong dtype": (
        {"instances": [1.5]}, 400,
        "Input 'text' expects strings or {\"b64\": ...} objects (DT_STRING), got JSON value 1.5."),
    "wrong dtype, float input": (
        {"signature_name": "scale", "inputs": {"x": [["a", 2, 3]], "factor": [1]}}, 400,
        "Input 'x' expects numbers (DT_FLOAT), got JSON value \"a\"."),
    # Values are shown as the client wrote them in JSON, not as Python's repr.
    "null for a number": (
        {"signature_name": "scale", "inputs": {"x": [[None, 2, 3]], "factor": [1]}}, 400,
        "Input 'x' expects numbers (DT_FLOAT), got JSON value null."),
    "NaN for a string": (
        {"instances": [float("nan")]}, 400,
        "Input 'text' expects strings or {\"b64\": ...} objects (DT_STRING), got JSON value "
        "NaN."),
    "false for a string": (
        {"instances": [False]}, 400,
        "Input 'text' expects strings or {\"b64\": ...} objects (DT_STRING), got JSON value "
        "false."),
    "invalid base64": (
        {"instances": [{"b64": "not base64!"}]}, 400,
        "Input 'text' holds a 'b64' value that is not valid base64."),
    "lone surrogate": (
        {"instances": ["\ud800"]}, 400, "Input 'text' holds a string that is not valid UTF-8"),
    "empty batch": (
        {"instances": []}, 400, "Empty batch: 'instances' is an empty list; send at least one."),
    "empty batch, columnar": (
        {"inputs": []}, 400, "Empty batch: the request has 0 rows; send at least one."),
    "oversized batch": (
        {"instances": ["a"] * (MAX_BATCH_SIZE + 1)}, 400,
        f"Batch of {MAX_BATCH_SIZE + 1} rows is larger than the maximum batch size "
        f"{MAX_BATCH_SIZE} (--max_batch_size); split the request."),
    "ragged tensor": (
        {"signature_name": "scale", "inputs": {"x": [[1, 2, 3], [1, 2]], "factor": [1, 1]}},
        400, "Input 'x' is not a rectangular tensor"),
    "wrong shape": (
        {"signature_name": "scale", "inputs": {"x": [[1, 2]], "factor": [1]}}, 400,
        "Input 'x' has shape [1, 2] but signature 'scale' expects [-1, 3]."),
    "plain list for two inputs": (
        {"signature_name": "scale", "instances": [[1, 2, 3]]}, 400,
        "'instances' is a plain list, but the signature has several inputs {factor,x}"),
    "both formats": (
        {"instances": ["a"], "inputs": ["a"]}, 400, "Request has both 'instances' and 'inputs'"),
    "no inputs": ({"signature_name": "serving_default"}, 400,
                  "Missing 'inputs' or 'instances' key"),
    "unknown signature": (
        {"signature_name": "nope", "instances": ["a"]}, 400,
        'Serving signature key "nope" not found.'),
    "non-UTF-8 text from b64": (
        {"instances": [{"b64": base64.b64encode(b"\xff\xfe").decode()}]}, 400,
        "Signature 'serving_default' failed on the request's data: Invalid formatting on "
        "input string"),
}


@pytest.mark.parametrize("case", sorted(BAD_REQUESTS))
def test_bad_predict_body_gets_its_status_and_the_server_keeps_serving(case, server):
    body, status, message = BAD_REQUESTS[case]
    answer_status, answer = call(server, "POST", "/v1/models/toy:predict", body)
    assert answer_status == status
    assert message in answer["error"]
    assert call(server, "POST", "/v1/models/toy:predict", {"instances": ["ok"]})[0] == 200


@pytest.mark.parametrize("method, path, raw, status, message", [
    ("POST", "/v1/models/toy:predict", b'{"instances": ["\xff"]}', 400,
     "Request body is not valid UTF-8 (byte 16)"),
    ("POST", "/v1/models/toy:predict", b'{"instances": [', 400, "JSON Parse error"),
    ("POST", "/v1/models/toy:predict", b'["a"]', 400, "The request body must be a JSON object."),
    ("POST", "/v1/models/toy:predict", b"{" + b" " * MAX_REQUEST_BYTES + b"}", 413,
     f"larger than --max_request_bytes={MAX_REQUEST_BYTES}"),
    ("POST", "/v1/models/bert:predict", b'{"instances": ["a"]}', 404,
     "Servable not found for request: Latest(bert)."),
    ("POST", "/v1/models/toy/versions/2:predict", b'{"instances": ["a"]}', 404,
     "Servable not found for request: Specific(toy, 2)."),
    ("POST", "/v1/models/toy/labels/stable:predict", b'{"instances": ["a"]}', 400,
     "Unrecognized servable version label: stable."),
    ("POST", "/v1/models/toy:classify", b'{"instances": [{"x": 1.0}]}', 400,
     "Missing or empty 'examples'"),
    ("POST", "/v1/models/toy:regress", b'{"examples": [{"x": [1.0, "a"]}]}', 400,
     "Element 0 of 'examples': feature 'x' must hold strings, integers or numbers (one kind "
     "per feature), got [1.0, \"a\"]."),
    ("POST", "/v1/models/toy:classify", b'{"examples": [{"y": 1.0}]}', 400,
     "Feature: x (data type: float) is required but could not be found."),
    ("POST", "/v1/models/toy:explain", b"{}", 400,
     "Malformed request: POST /v1/models/toy:explain"),
    ("GET", "/v1/models/bert", None, 404, "Could not find any versions of model bert"),
    ("GET", "/v1/models/toy/versions/5", None, 404, "Could not find version 5 of model toy"),
    ("GET", "/v1/models/toy/versions/5/metadata", None, 404,
     "Servable not found for request: Specific(toy, 5)."),
    ("GET", "/index.html", None, 404, "Malformed request: GET /index.html"),
])
def test_bad_request_gets_its_status_and_the_server_keeps_serving(server, method, path, raw,
                                                                  status, message):
    answer_status, answer = call(server, method, path, raw=raw)
    assert answer_status == status
    assert message in answer["error"]
    assert call(server, "POST", "/v1/models/toy:predict", {"instances": ["ok"]})[0] == 200


def test_classify_and_regress_as_tf_serving_answers_them(server):
    status, body = call(server, "POST", "/v1/models/toy:classify",
                        {"examples": [{"x": 0.25}, {"x": 0.5}]})
    assert (status, body) == (200, {"results": [[["pos", 0.25], ["neg", 0.75]],
                                                [["pos", 0.5], ["neg", 0.5]]]})
    # The context's features complete every example; a named signature is used as named.
    status, body = call(server, "POST", "/v1/models/toy/versions/1:regress",
                        {"signature_name": "tensorflow/serving/regress", "context": {"x": 2.0},
                         "examples": [{}, {"x": -0.5}]})
    assert (status, body) == (200, {"results": [4.0, -1.0]})


@pytest.mark.parametrize("version, header", [("HTTP/1.1", "Connection: close\r\n"),
                                             ("HTTP/1.0", "")])
def test_a_client_that_asks_for_the_end_of_the_connection_gets_it_after_its_answer(
        server, version, header):
    # A POST's answer kept the connection open for IDLE_TIMEOUT_SECONDS (15 s) whatever the
    # client asked: one reading its answer to the end of the stream waited that long.
    body = json.dumps({"instances": ["four"]}).encode()
    request = (f"POST /v1/models/toy:predict {version}\r\nHost: x\r\n{header}"
               f"Content-Length: {len(body)}\r\n\r\n").encode() + body
    with socket.create_connection(("127.0.0.1", server.rest_api_port), timeout=5) as client:
        client.sendall(request)
        answer = b""
        while chunk := client.recv(65536):  # a timeout (5 s) fails the test
            answer += chunk
    head, _, payload = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 ") and b"\r\nConnection: close" in head, head
    assert json.loads(payload)["predictions"][0]["length"] == 4


def test_connection_is_kept_alive_across_requests(server):
    connection = http.client.HTTPConnection("127.0.0.1", server.rest_api_port, timeout=TIMEOUT)
    try:
        for text in ["one", "two", "three"]:
            connection.request("POST", "/v1/models/toy:predict",
                               body=json.dumps({"instances": [text]}))
            response = json.loads(connection.getresponse().read())
            assert response["predictions"][0]["length"] == len(text)
    finally:
        connection.close()


def test_a_body_over_the_limit_sent_whole_before_reading_gets_its_413(server):
    # Clients that send the whole body before reading (Python's http.client and urllib) got a
    # broken pipe for bodies over ~16 MB: the server stopped reading what it drops there.
    connection = http.client.HTTPConnection("127.0.0.1", server.rest_api_port, timeout=TIMEOUT)
    try:
        connection.request("POST", "/v1/models/toy:predict", body=b"x" * (48 << 20))
        response = connection.getresponse()
        assert response.status == 413
        assert "larger than" in json.loads(response.read())["error"]
    finally:
        connection.close()
