"""TF Serving's REST API over a `ModelManager`, on the standard library's HTTP server.

    GET  /v1/models/<name>[/versions/<v>]            -> GetModelStatusResponse as JSON
    GET  /v1/models/<name>[/versions/<v>]/metadata   -> {"model_spec", "metadata"}
    POST /v1/models/<name>[/versions/<v>]:predict    -> {"predictions"} or {"outputs"}
    POST /v1/models/<name>[/versions/<v>]:classify   -> {"results": [[[label, score], ...], ...]}
    POST /v1/models/<name>[/versions/<v>]:regress    -> {"results": [value, ...]}

Errors are `{"error": message}` with the HTTP status TF Serving gives the same status code
(400 for INVALID_ARGUMENT, 404 for NOT_FOUND, ...). Every request gets an answer naming what is
wrong with it: a bad request line, header, Content-Length or version number is 400, a body over
`max_request_bytes` 413, a method other than GET/POST 405. Query strings are ignored.

Bounded concurrency: `num_threads` workers serve connections and up to `max_queued` accepted
connections wait for one; a connection beyond that is answered 503 at once and closed, as is a
request whose body does not fit in the `Admission` budget. The listen backlog is 128, so bursts
of clients connect without stalls. A client that goes away costs one log line.

Example:
    >>> server = RestApiServer(manager, Admission(256 << 20), host="127.0.0.1", port=8501,
    ...                        max_request_bytes=1 << 20, num_threads=40, max_queued=64)
    >>> threading.Thread(target=server.serve_forever).start()
    >>> # curl -d '{"instances": ["a movie"]}' localhost:8501/v1/models/bert:predict
    >>> server.shutdown(); server.server_close()
"""

import concurrent.futures
import http
import http.server
import json
import logging
import re
import socket
import sys
import threading
import time

import grpc
from google.protobuf import json_format

from bert_tf.serving import example_requests, json_tensors
from bert_tf.serving.errors import ServingError

# The model name cannot hold '/' or ':'; versions are integers (TF Serving's own patterns).
_MODEL = (r"/v1/models/(?P<name>[^/:]+)"
          r"(?:/versions/(?P<version>[0-9]+)|/labels/(?P<label>[^/:]+))?")
_POST = re.compile(_MODEL + r":(?P<method>classify|regress|predict)", re.IGNORECASE)
_GET = re.compile(_MODEL + r"(?P<metadata>/metadata)?", re.IGNORECASE)
# Content-Length: up to 19 digits (int64), as ASCII; str.isdigit would take "²".
_LENGTH = re.compile(r"[0-9]{1,19}")
_INT64_MAX = (1 << 63) - 1
LISTEN_BACKLOG = 128
# Seconds a connection may sit idle or stall mid-request before its worker is freed: idle
# keep-alive connections hold workers, so this is short.
IDLE_TIMEOUT_SECONDS = 15
_ALLOWED = "GET, POST"
# Bounds on reading what a client still sends after its connection's last answer.
_DRAIN_SECONDS = 2.0
_DRAIN_BYTES = 16 << 20
_BUSY = json.dumps({"error": "The server is busy: every worker and queue slot is taken; retry "
                             "shortly."}).encode()
_BUSY_RESPONSE = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                  b"Retry-After: 1\r\nConnection: close\r\nContent-Length: "
                  + str(len(_BUSY)).encode() + b"\r\n\r\n" + _BUSY)


class RestApiServer(http.server.HTTPServer):
    """An HTTP server answering TF Serving's REST routes with a bounded pool of workers;
    `server_address` has the bound port."""

    request_queue_size = LISTEN_BACKLOG

    def __init__(self, manager, admission, host, port, max_request_bytes, num_threads,
                 max_queued):
        self.manager = manager
        self.admission = admission
        self.max_request_bytes = max_request_bytes
        if ":" in host:
            self.address_family = socket.AF_INET6
        self._workers = concurrent.futures.ThreadPoolExecutor(num_threads,
                                                              thread_name_prefix="rest")
        self._slots = threading.BoundedSemaphore(num_threads + max_queued)
        self._open = set()
        self._open_lock = threading.Lock()
        super().__init__((host, port), _Handler)

    def process_request(self, request, client_address):
        """Hands the connection to a worker, or answers 503 when all slots are taken."""
        if not self._slots.acquire(blocking=False):
            logging.warning("REST server busy: refused a connection from %s", client_address[0])
            try:
                request.settimeout(1.0)
                request.sendall(_BUSY_RESPONSE)
            except OSError:
                pass
            self.close_request(request)
            return
        with self._open_lock:
            self._open.add(request)
        self._workers.submit(self._serve, request, client_address)

    def _serve(self, request, client_address):
        try:
            self.finish_request(request, client_address)
        except Exception:  # noqa: BLE001 -- one log line, in handle_error
            self.handle_error(request, client_address)
        finally:
            with self._open_lock:
                self._open.discard(request)
            self.shutdown_request(request)
            self._slots.release()

    def shutdown_request(self, request):
        """Ends a connection after its answer: the client may still be sending (a body not
        read, an over-long line), and closing with unread input would reset the connection
        before the client reads the answer, so that input is read and dropped first, within
        bounds."""
        try:
            request.shutdown(socket.SHUT_WR)
            deadline = time.monotonic() + _DRAIN_SECONDS
            drained = 0
            while drained < _DRAIN_BYTES and (remaining := deadline - time.monotonic()) > 0:
                request.settimeout(remaining)
                chunk = request.recv(1 << 16)
                if not chunk:
                    break
                drained += len(chunk)
        except OSError:
            pass
        self.close_request(request)

    def handle_error(self, request, client_address):
        """One line per connection that ended abnormally (typically a client gone away)."""
        error = sys.exc_info()[1]
        logging.info("REST connection from %s ended: %s: %s", client_address[0],
                     type(error).__name__, error)

    def server_close(self):
        """Closes the port and the open connections, so that no worker waits for an idle
        client."""
        super().server_close()
        with self._open_lock:
            for request in self._open:
                try:
                    request.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        self._workers.shutdown(wait=True, cancel_futures=True)


class _Handler(http.server.BaseHTTPRequestHandler):
    # HTTP/1.1 keeps connections open between requests, as clients of TF Serving expect.
    protocol_version = "HTTP/1.1"
    timeout = IDLE_TIMEOUT_SECONDS

    def do_GET(self):  # noqa: N802 -- BaseHTTPRequestHandler's method names
        self._answer(self._get)

    def do_POST(self):  # noqa: N802
        self._answer(self._post)

    def _method_not_allowed(self):
        self.close_connection = True
        self._send(405, {"error": f"Method {self.command} is not allowed; this API answers "
                                  f"{_ALLOWED}."}, {"Allow": _ALLOWED})

    do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = do_TRACE = do_CONNECT = \
        _method_not_allowed

    def send_error(self, code, message=None, explain=None):
        """What the base class answers malformed HTTP with (bad request line or version, lines
        too long, unknown method): 405 for a method, else 400, as JSON like every answer."""
        if code == http.HTTPStatus.NOT_IMPLEMENTED:  # a method no handler exists for
            return self._method_not_allowed()
        self.close_connection = True
        # A request line that did not parse leaves HTTP/0.9, which would send no status line.
        self.request_version = self.protocol_version
        self._send(400, {"error": f"{http.HTTPStatus(code).phrase}: "
                                  f"{message or explain or 'malformed request'}"})

    def _answer(self, route):
        try:
            status, body = route(self.path.split("?", 1)[0].split("#", 1)[0])
        except ServingError as error:
            status, body = error.http_status, {"error": error.message}
        except _TooLarge as error:
            status, body = 413, {"error": str(error)}
        except OSError:
            raise  # the client went away: nobody to answer
        except Exception as error:  # noqa: BLE001 -- the client gets an answer, the log a line
            logging.error("REST %s %s failed: %s: %s", self.command, self.path[:200],
                          type(error).__name__, error)
            status, body = 500, {"error": f"{type(error).__name__}: {error}"}
        self._send(status, body)

    def _get(self, path):
        match = _GET.fullmatch(path)
        if not match:
            raise _malformed("GET", path)
        name, version, label = _model_spec(match)
        if match["metadata"]:
            return 200, self._metadata(name, version, label)
        if label:
            raise _invalid(f"Unrecognized servable version label: {label}")
        return 200, json_format.MessageToDict(
            self.server.manager.status(name, version), preserving_proto_field_name=True,
            always_print_fields_with_no_presence=True)

    def _post(self, path):
        # Until the body is read, the connection cannot carry another request.
        self.close_connection = True
        length = self._content_length()
        with self.server.admission.admit(length):
            raw_body = self.rfile.read(length)
            if len(raw_body) != length:
                raise ConnectionAbortedError(f"the client sent {len(raw_body)} of the "
                                             f"{length} bytes its Content-Length announced")
            self.close_connection = False
            match = _POST.fullmatch(path)
            if not match:
                raise _malformed("POST", path)
            model_spec = _model_spec(match)
            body = _parse_json(raw_body)
            method = match["method"].lower()
            if method == "predict":
                return 200, self._predict(model_spec, body)
            return 200, self._examples(model_spec, body, method)

    def _content_length(self):
        if self.headers.get("Transfer-Encoding"):
            raise _invalid("Chunked (Transfer-Encoding) request bodies are not supported; send "
                           "a Content-Length header.")
        lengths = self.headers.get_all("Content-Length", [])
        if not lengths:
            raise _invalid("A POST needs a Content-Length header.")
        if len(lengths) > 1:
            # Which one frames the body is ambiguous: a proxy that reads the other one would
            # see another request in this body (RFC 9112 section 6.3 says reject).
            raise _invalid(f"The request has {len(lengths)} Content-Length headers "
                           f"({', '.join(json_tensors.short_json(v) for v in lengths)}); send "
                           f"exactly one.")
        (length,) = lengths
        length = length.strip()
        if length.isascii() and length.isdigit() and not _LENGTH.fullmatch(length):
            raise _TooLarge(f"Request body of a {len(length)}-digit number of bytes is larger "
                            f"than --max_request_bytes={self.server.max_request_bytes}.")
        if not _LENGTH.fullmatch(length):
            raise _invalid(f"Content-Length must be a number of bytes, got "
                           f"{json_tensors.short_json(length)}.")
        if int(length) > self.server.max_request_bytes:
            # Refused before reading: the body is what the limit protects the server from.
            raise _TooLarge(f"Request body of {length} bytes is larger than "
                            f"--max_request_bytes={self.server.max_request_bytes}.")
        return int(length)

    def _predict(self, model_spec, body):
        signature_name = _signature_name(body)
        with self.server.manager.servable(*model_spec) as servable:
            signature = servable.signature(signature_name)
            inputs, row_format = json_tensors.request_tensors(body, signature.input_specs)
            outputs = signature.run(inputs)
        return json_tensors.response_json(outputs, row_format)

    def _examples(self, model_spec, body, method):
        signature_name = _signature_name(body)
        input_proto = example_requests.input_from_json(body)
        api = example_requests.CLASSIFY if method == "classify" else example_requests.REGRESS
        with self.server.manager.servable(*model_spec) as servable:
            _, outputs = example_requests.run(servable, signature_name, input_proto, api)
        if api is example_requests.CLASSIFY:
            return example_requests.classification_json(
                example_requests.classification_result(outputs))
        return example_requests.regression_json(example_requests.regression_result(outputs))

    def _metadata(self, name, version, label):
        with self.server.manager.servable(name, version, label) as servable:
            signature_defs = json_format.MessageToDict(servable.signature_def_map,
                                                       preserving_proto_field_name=True)
            return {"model_spec": {"name": name, "signature_name": "",
                                   "version": str(servable.version)},
                    "metadata": {"signature_def": signature_defs}}

    def _send(self, status, body, headers=None):
        # One line of JSON ending in a newline, as a terminal user of curl expects.
        payload = (json.dumps(body) + "\n").encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format, *args):  # noqa: A002 -- the base class's signature
        # Access logs go to debug: one line per request would drown the server's own log.
        logging.debug("%s %s", self.address_string(), format % args)


class _TooLarge(Exception):
    """A body over the size limit: HTTP 413, which no canonical status code maps to."""


def _invalid(message):
    return ServingError(grpc.StatusCode.INVALID_ARGUMENT, message)


def _model_spec(match):
    version = match["version"]
    if version is not None and (len(version) > 19 or int(version) > _INT64_MAX):
        raise _invalid(f"Version {version[:25]}{'...' if len(version) > 25 else ''} is not a "
                       f"valid model version (a non-negative int64).")
    return match["name"], int(version) if version else None, match["label"] or ""


def _signature_name(body):
    signature_name = body.get("signature_name", "")
    if not isinstance(signature_name, str):
        raise _invalid("'signature_name' must be a string.")
    return signature_name


def _parse_json(raw_body):
    try:
        text = raw_body.decode("utf-8")
    except UnicodeDecodeError as error:
        raise _invalid(f"Request body is not valid UTF-8 (byte {error.start}); JSON is UTF-8 "
                       f"text, send bytes as {{\"b64\": ...}}.") from error
    try:
        body = json.loads(text)
    except (ValueError, RecursionError) as error:
        # ValueError covers JSONDecodeError and integers of over 4,300 digits.
        raise _invalid(f"JSON Parse error: {error}") from error
    if not isinstance(body, dict):
        raise _invalid("The request body must be a JSON object.")
    return body


def _malformed(method, path):
    # As TF Serving: a bad route under /v1/ is a bad request, anything else is not there at all.
    code = (grpc.StatusCode.INVALID_ARGUMENT if path.lower().startswith("/v1/")
            else grpc.StatusCode.NOT_FOUND)
    return ServingError(code, f"Malformed request: {method} {path[:200]}")
