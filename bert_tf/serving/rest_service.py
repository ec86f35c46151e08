"""TF Serving's REST API over a `ModelManager`, on Python's threading HTTP server.

    GET  /v1/models/<name>[/versions/<v>]            -> GetModelStatusResponse as JSON
    GET  /v1/models/<name>[/versions/<v>]/metadata   -> {"model_spec", "metadata"}
    POST /v1/models/<name>[/versions/<v>]:predict    -> {"predictions"} or {"outputs"}

Errors are `{"error": message}` with the HTTP status TF Serving gives the same status code
(400 for INVALID_ARGUMENT, 404 for NOT_FOUND, ...); bodies over `max_request_bytes` get 413.
`:classify` and `:regress` answer 501: Classify is served over gRPC.

Example:
    >>> server = RestApiServer(manager, host="127.0.0.1", port=8501, max_request_bytes=1 << 20)
    >>> threading.Thread(target=server.serve_forever).start()
    >>> # curl -d '{"instances": ["a movie"]}' localhost:8501/v1/models/bert:predict
    >>> server.shutdown(); server.server_close()
"""

import http.server
import json
import logging
import re
import socket

import grpc
from google.protobuf import json_format

from bert_tf.serving import json_tensors
from bert_tf.serving.errors import ServingError

# The model name cannot hold '/' or ':'; versions are integers (TF Serving's own patterns).
_MODEL = (r"/v1/models/(?P<name>[^/:]+)"
          r"(?:/versions/(?P<version>[0-9]+)|/labels/(?P<label>[^/:]+))?")
_PREDICT = re.compile(_MODEL + r":(?P<method>classify|regress|predict)", re.IGNORECASE)
_STATUS = re.compile(_MODEL + r"(?P<metadata>/metadata)?", re.IGNORECASE)


class RestApiServer(http.server.ThreadingHTTPServer):
    """An HTTP server answering TF Serving's REST routes; `server_address` has the bound port."""

    daemon_threads = True

    def __init__(self, manager, host, port, max_request_bytes):
        self.manager = manager
        self.max_request_bytes = max_request_bytes
        if ":" in host:
            self.address_family = socket.AF_INET6
        super().__init__((host, port), _Handler)


class _Handler(http.server.BaseHTTPRequestHandler):
    # HTTP/1.1 keeps connections open between requests, as clients of TF Serving expect.
    protocol_version = "HTTP/1.1"
    # Seconds a connection may sit idle or stall mid-request before its thread is freed, so a
    # client that never sends its promised body cannot hold a thread forever.
    timeout = 60

    def do_GET(self):  # noqa: N802 -- BaseHTTPRequestHandler's method names
        match = _STATUS.fullmatch(self.path)
        if not match:
            return self._send_error(_malformed("GET", self.path))
        try:
            name, version, label = _model_spec(match)
            if match["metadata"]:
                body = self._metadata(name, version, label)
            else:
                if label:
                    raise ServingError(grpc.StatusCode.INVALID_ARGUMENT,
                                       f"Unrecognized servable version label: {label}")
                body = json_format.MessageToDict(
                    self.server.manager.status(name, version), preserving_proto_field_name=True,
                    always_print_fields_with_no_presence=True)
        except ServingError as error:
            return self._send_error(error)
        self._send(200, body)

    def do_POST(self):  # noqa: N802
        length = self.headers.get("Content-Length")
        if length is None or not length.isdigit():
            self.close_connection = True
            return self._send(411, {"error": "A POST needs a Content-Length header."})
        if int(length) > self.server.max_request_bytes:
            # Refuse before reading: the body is what the limit protects the server from.
            self.close_connection = True
            limit = self.server.max_request_bytes
            return self._send(413, {"error": f"Request body of {length} bytes is larger than "
                                             f"--max_request_bytes={limit}."})
        raw_body = self.rfile.read(int(length))
        match = _PREDICT.fullmatch(self.path)
        if not match:
            return self._send_error(_malformed("POST", self.path))
        try:
            if match["method"].lower() != "predict":
                raise ServingError(grpc.StatusCode.UNIMPLEMENTED,
                                   f"This server answers :{match['method']} over gRPC only "
                                   f"(Classify); over REST it answers :predict.")
            body = self._predict(*_model_spec(match), _parse_json(raw_body))
        except ServingError as error:
            return self._send_error(error)
        self._send(200, body)

    def _predict(self, name, version, label, body):
        signature_name = body.get("signature_name", "")
        if not isinstance(signature_name, str):
            raise ServingError(grpc.StatusCode.INVALID_ARGUMENT,
                               "'signature_name' must be a string.")
        with self.server.manager.servable(name, version, label) as servable:
            signature = servable.signature(signature_name)
            inputs, row_format = json_tensors.request_tensors(body, signature.input_specs)
            outputs = signature.run(inputs)
        return json_tensors.response_json(outputs, row_format)

    def _metadata(self, name, version, label):
        with self.server.manager.servable(name, version, label) as servable:
            signature_defs = json_format.MessageToDict(servable.signature_def_map,
                                                       preserving_proto_field_name=True)
            return {"model_spec": {"name": name, "signature_name": "",
                                   "version": str(servable.version)},
                    "metadata": {"signature_def": signature_defs}}

    def _send_error(self, error):
        self._send(error.http_status, {"error": error.message})

    def _send(self, status, body):
        payload = json.dumps(body).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format, *args):  # noqa: A002 -- the base class's signature
        # Access logs go to debug: one line per request would drown the server's own log.
        logging.debug("%s %s", self.address_string(), format % args)


def _model_spec(match):
    return match["name"], int(match["version"]) if match["version"] else None, match["label"] or ""


def _parse_json(raw_body):
    try:
        text = raw_body.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ServingError(grpc.StatusCode.INVALID_ARGUMENT,
                           f"Request body is not valid UTF-8 (byte {error.start}); JSON is UTF-8 "
                           f"text, send bytes as {{\"b64\": ...}}.") from error
    try:
        body = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as error:
        raise ServingError(grpc.StatusCode.INVALID_ARGUMENT,
                           f"JSON Parse error: {error}") from error
    if not isinstance(body, dict):
        raise ServingError(grpc.StatusCode.INVALID_ARGUMENT,
                           "The request body must be a JSON object.")
    return body


def _malformed(method, path):
    # As TF Serving: a bad route under /v1/ is a bad request, anything else is not there at all.
    code = (grpc.StatusCode.INVALID_ARGUMENT if path.lower().startswith("/v1/")
            else grpc.StatusCode.NOT_FOUND)
    return ServingError(code, f"Malformed request: {method} {path}")
