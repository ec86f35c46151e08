"""TF Serving's REST API over a `ModelManager`, on the standard library's HTTP server.

    GET  /v1/models/<name>[/versions/<v>]            -> GetModelStatusResponse as JSON
    GET  /v1/models/<name>[/versions/<v>]/metadata   -> {"model_spec", "metadata"}
    POST /v1/models/<name>[/versions/<v>]:predict    -> {"predictions"} or {"outputs"}
    POST /v1/models/<name>[/versions/<v>]:classify   -> {"results": [[[label, score], ...], ...]}
    POST /v1/models/<name>[/versions/<v>]:regress    -> {"results": [value, ...]}

Errors are `{"error": message}` with the HTTP status TF Serving gives the same status code
(400 for INVALID_ARGUMENT, 404 for NOT_FOUND, ...). Every request gets an answer naming what is
wrong with it: a bad request line, header, Content-Length, chunk or version number is 400, a
body over `max_request_bytes` 413, a method other than GET/POST 405. A body comes with a
Content-Length or chunked (Transfer-Encoding: chunked). Query strings are ignored.

Bounded resources. A connection holds one of `num_threads` workers only while its client sends
a request or is answered; between requests, and before the first, it waits in `_Connections`,
which hands it to a worker when bytes arrive and closes it after IDLE_TIMEOUT_SECONDS of
silence. At most `num_threads + max_queued` connections are open: one more takes the place of
the longest-idle one, or, when every open connection has a request in progress or waiting for a
worker, is answered 503 at once and closed. A request's body, then its answer (a JSON answer
bounded before it is written), hold their size of the `Admission` budget, refused with 503 when
it is spent. An answer is sent as long as the client keeps reading it; one cut off is logged as
a warning. The listen backlog is 128, so bursts of clients connect without stalls. A client
that goes away costs one log line.

Example:
    >>> server = RestApiServer(manager, Admission(256 << 20), host="127.0.0.1", port=8501,
    ...                        max_request_bytes=1 << 20, num_threads=40, max_queued=64)
    >>> threading.Thread(target=server.serve_forever).start()
    >>> # curl -d '{"instances": ["a movie"]}' localhost:8501/v1/models/bert:predict
    >>> server.shutdown(); server.server_close()
"""

import concurrent.futures
import contextlib
import http
import http.server
import json
import logging
import re
import selectors
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
# A chunk size: up to 16 hex digits (int64); its line, extensions included, and each trailer
# line at most _MAX_CHUNK_LINE bytes, at most _MAX_TRAILER_LINES of them.
_CHUNK_SIZE = re.compile(rb"[0-9a-fA-F]{1,16}")
_MAX_CHUNK_LINE = 4096
_MAX_TRAILER_LINES = 64
LISTEN_BACKLOG = 128
# Seconds a connection may sit idle between requests, or a client stall mid-request or
# mid-answer (no byte arriving, none of the answer taken), before the connection is closed.
IDLE_TIMEOUT_SECONDS = 15
_ALLOWED = "GET, POST"
# Bounds on reading (and dropping) what a client still sends after its connection's last
# answer, e.g. the rest of a body refused with 413: clients that send a whole body before
# reading (Python's http.client and urllib) get the answer only if it is read to its end, not a
# broken pipe. Time is the bound that matters (a worker waits meanwhile); the bytes are not
# kept (tests/serving/test_rest_api.py sends 48 MB over loopback).
_DRAIN_SECONDS = 2.0
_DRAIN_BYTES = 1 << 30
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
        self.idle_timeout = IDLE_TIMEOUT_SECONDS
        if ":" in host:
            self.address_family = socket.AF_INET6
        super().__init__((host, port), _Handler)
        self._workers = concurrent.futures.ThreadPoolExecutor(num_threads,
                                                              thread_name_prefix="rest")
        self._connections = _Connections(num_threads + max_queued, self.idle_timeout,
                                         self._dispatch)

    def process_request(self, request, client_address):
        """Lets the connection wait for its first request, or answers 503 when it cannot be
        let in."""
        if self._connections.add(request, client_address):
            return
        logging.warning("REST server busy: refused a connection from %s", client_address[0])
        try:
            request.settimeout(1.0)
            request.sendall(_BUSY_RESPONSE)
        except OSError:
            pass
        self.close_request(request)

    def _dispatch(self, request, client_address):
        self._workers.submit(self._serve, request, client_address)

    def _serve(self, request, client_address):
        """Answers what the client has sent, then parks the connection for its next request,
        or closes it."""
        keep_alive = False
        try:
            keep_alive = not self.RequestHandlerClass(request, client_address,
                                                      self).close_connection
        except Exception:  # noqa: BLE001 -- one log line, in handle_error
            self.handle_error(request, client_address)
        if keep_alive:
            self._connections.park(request, client_address)
        else:
            self.shutdown_request(request)
            self._connections.discard(request)

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

    def server_close(self, grace_seconds=0.0):
        """Closes the port and the open connections, so that no worker waits for a client: the
        idle ones at once, those with a request in progress once it is answered (up to
        `grace_seconds`: a rolling restart's SIGTERM must not cut answers off)."""
        super().server_close()
        self._connections.close(grace_seconds)
        self._workers.shutdown(wait=True, cancel_futures=True)


class _Connections:
    """The REST server's open connections: at most `max_open`, each holding a worker only
    while its client is sending a request or being answered.

    Between requests (and before its first) a connection is parked here: one thread watches the
    parked ones, hands a connection to `dispatch(connection, client_address)` once bytes arrive,
    and closes it after `idle_timeout` seconds without any. Idle clients thus hold no worker:
    when every connection held one until its timeout, 100 connections that said nothing made a
    request behind them wait 16.5 s. A new connection beyond `max_open` takes the place of the
    longest-parked one that has sent nothing (closed: HTTP lets a server close an idle
    connection, and clients reconnect); when there is none, every open connection has a request
    in progress or waiting for a worker, and `add` refuses.
    """

    def __init__(self, max_open, idle_timeout, dispatch):
        self._max_open = max_open
        self._idle_timeout = idle_timeout
        self._dispatch = dispatch
        self._lock = threading.Lock()
        self._open = set()
        self._parked = {}  # connection -> (client address, parked at), longest-parked first
        self._changes = []  # (watch?, connection) for the watching thread to apply, in order
        self._closed = False
        self._busy_left = threading.Condition(self._lock)  # notified as connections close
        self._selector = selectors.DefaultSelector()
        self._wake_up, self._waker = socket.socketpair()
        self._wake_up.setblocking(False)
        self._waker.setblocking(False)
        self._selector.register(self._wake_up, selectors.EVENT_READ)
        self._thread = threading.Thread(target=self._watch, name="rest-connections",
                                        daemon=True)
        self._thread.start()

    def add(self, connection, client_address):
        """Parks a new connection, closing the longest-idle one if `max_open` are open; False
        (and nothing done) when none is idle."""
        with self._lock:
            if len(self._open) >= self._max_open:
                idle = next((c for c in self._parked if not _has_input(c)), None)
                if idle is None:
                    return False
                del self._parked[idle]
                self._open.discard(idle)
                self._changes.append((False, idle))
            self._open.add(connection)
        self.park(connection, client_address)
        return True

    def park(self, connection, client_address):
        """Watches an open connection until its client sends something (or stays quiet for
        `idle_timeout`)."""
        with self._lock:
            if self._closed:
                connection.close()
                self._open.discard(connection)
                self._busy_left.notify_all()
                return
            self._parked[connection] = (client_address, time.monotonic())
            self._changes.append((True, connection))
            self._wake()

    def discard(self, connection):
        """Forgets a connection its worker closed."""
        with self._lock:
            self._open.discard(connection)
            self._busy_left.notify_all()

    def close(self, grace_seconds=0.0):
        """Stops watching and closes the parked connections; lets the workers answer the
        requests in progress for up to `grace_seconds` (their connections then close instead
        of being parked), and wakes those still reading after it (their reads end)."""
        with self._lock:
            self._closed = True
            self._wake()
        self._thread.join()
        deadline = time.monotonic() + grace_seconds
        with self._lock:
            while ((busy := self._open - self._parked.keys())
                   and (remaining := deadline - time.monotonic()) > 0):
                self._busy_left.wait(remaining)
            for connection in busy:
                try:
                    connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def _wake(self):
        """Makes the watching thread's select return (called holding the lock)."""
        try:
            self._waker.send(b"\0")
        except BlockingIOError:
            pass  # the socket is full of wake-ups already

    def _watch(self):
        while True:
            with self._lock:
                changes, self._changes = self._changes, []
                closed = self._closed
                oldest = next(iter(self._parked.values()), None)
            for watch, connection in changes:
                if watch:
                    self._selector.register(connection, selectors.EVENT_READ)
                else:
                    self._selector.unregister(connection)
                    connection.close()
            if closed:
                break
            timeout = (None if oldest is None
                       else max(0.0, oldest[1] + self._idle_timeout - time.monotonic()))
            for key, _ in self._selector.select(timeout):
                if key.fileobj is self._wake_up:
                    self._wake_up.recv(4096)  # the rest, if any, wakes the next select
                    continue
                with self._lock:
                    # Gone when `add` closed it meanwhile: its closing is among the changes.
                    entry = self._parked.pop(key.fileobj, None)
                if entry is not None:
                    self._selector.unregister(key.fileobj)
                    self._dispatch(key.fileobj, entry[0])
            self._close_idle()
        with self._lock:
            for key in list(self._selector.get_map().values()):
                key.fileobj.close()
            self._selector.close()
            self._waker.close()

    def _close_idle(self):
        expired = []
        with self._lock:
            deadline = time.monotonic() - self._idle_timeout
            for connection, (_, parked_at) in self._parked.items():
                if parked_at > deadline:
                    break
                expired.append(connection)
            for connection in expired:
                del self._parked[connection]
                self._open.discard(connection)
        for connection in expired:
            self._selector.unregister(connection)
            connection.close()


def _has_input(connection):
    """Whether the client sent bytes not yet read (the end of the stream is not input)."""
    try:
        return bool(connection.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT))
    except OSError:  # nothing to read yet (BlockingIOError), or the connection is broken
        return False


class _Handler(http.server.BaseHTTPRequestHandler):
    # HTTP/1.1 keeps connections open between requests, as clients of TF Serving expect.
    protocol_version = "HTTP/1.1"

    def setup(self):
        self.timeout = self.server.idle_timeout
        super().setup()

    def handle(self):
        """Answers the requests the client has sent, then returns: unless `close_connection`,
        the server parks the connection until the next one arrives (`_Connections`)."""
        self.close_connection = True
        self.handle_one_request()
        while not self.close_connection and self._input_waiting():
            self.handle_one_request()

    def _input_waiting(self):
        """Whether the client has sent more (buffered here, or in the socket), without
        waiting."""
        self.connection.setblocking(False)
        try:
            return bool(self.rfile.peek(1))
        finally:
            self.connection.settimeout(self.timeout)

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
            answer = _json_text(body)
            # Taken before the text is written: JSON is ~5x its float32 tensors.
            with self.server.admission.admit(answer.max_bytes, answer.what):
                self._send(status, answer)
            return
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
        # What the client asked for ("Connection: close", HTTP/1.0 without keep-alive), as the
        # request's headers set it; until the body is read, the connection cannot carry another
        # request whatever it asked.
        client_closes = self.close_connection
        self.close_connection = True
        with contextlib.ExitStack() as held:  # the body's share of the admission budget
            raw_body = self._body(held)
            self.close_connection = client_closes
            match = _POST.fullmatch(path)
            if not match:
                raise _malformed("POST", path)
            model_spec = _model_spec(match)
            body = _parse_json(raw_body)
            method = match["method"].lower()
            if method == "predict":
                return 200, self._predict(model_spec, body)
            return 200, self._examples(model_spec, body, method)

    def _body(self, held):
        """The request's body, framed by its Content-Length or sent in chunks (what clients
        streaming a body of unknown size send, and TF Serving reads); `held` keeps its bytes of
        the admission budget."""
        codings = self.headers.get_all("Transfer-Encoding", [])
        if not codings:
            length = self._content_length()
            held.callback(self.server.admission.take(length, "this request"))
            body = self.rfile.read(length)
            if len(body) != length:
                raise ConnectionAbortedError(f"the client sent {len(body)} of the {length} "
                                             f"bytes its Content-Length announced")
            return body
        if [coding.strip().lower() for coding in codings] != ["chunked"]:
            raise _invalid(f"Transfer-Encoding {json_tensors.short_json(', '.join(codings))} "
                           f"is not supported; send the body chunked or with a Content-Length.")
        if self.headers.get("Content-Length") is not None:
            # Which one frames the body is ambiguous (RFC 9112 section 6.1: a request
            # smuggling vector), as with two Content-Lengths.
            raise _invalid("The request has both Transfer-Encoding and Content-Length; send "
                           "one of them.")
        if self.request_version == "HTTP/1.0":  # HTTP/1.0 has no chunks (RFC 9112 6.1)
            raise _invalid("Transfer-Encoding is not HTTP/1.0; send a Content-Length.")
        return self._chunks(held)

    def _chunks(self, held):
        """A chunked body (RFC 9112 section 7.1), each chunk's bytes taken from the budget
        before it is read, refused past --max_request_bytes; extensions and trailers ignored."""
        body = bytearray()
        while True:
            size_line = self.rfile.readline(_MAX_CHUNK_LINE + 1)
            if not size_line.endswith(b"\n"):
                if len(size_line) > _MAX_CHUNK_LINE:
                    raise _invalid(f"A chunk-size line is longer than {_MAX_CHUNK_LINE} bytes.")
                raise ConnectionAbortedError("the client stopped sending in a chunked body")
            size = size_line.split(b";", 1)[0].rstrip(b" \t\r\n")  # space only before ";"
            if not _CHUNK_SIZE.fullmatch(size):
                raise _invalid(f"Chunk size must be hexadecimal digits, got "
                               f"{json_tensors.short_json(size.decode('latin-1'))}.")
            size = int(size, 16)
            if size == 0:
                break
            if len(body) + size > self.server.max_request_bytes:
                raise _TooLarge(f"Chunked request body of over {len(body) + size} bytes is "
                                f"larger than --max_request_bytes="
                                f"{self.server.max_request_bytes}.")
            held.callback(self.server.admission.take(size, "this request"))
            chunk = self.rfile.read(size)
            if len(chunk) != size or self.rfile.read(2) != b"\r\n":
                raise (ConnectionAbortedError("the client stopped sending in a chunk")
                       if len(chunk) != size else _invalid("A chunk must end with CRLF."))
            body += chunk
        # Trailer fields up to the empty line: bounded like the chunk-size lines, as a whole.
        for _ in range(_MAX_TRAILER_LINES):
            line = self.rfile.readline(_MAX_CHUNK_LINE + 1)
            if line in (b"\r\n", b"\n"):
                return bytes(body)
            if not line.endswith(b"\n"):
                raise ConnectionAbortedError("the client stopped sending in a chunked body")
        raise _invalid(f"A chunked body has over {_MAX_TRAILER_LINES} trailer lines.")

    def _content_length(self):
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
        """Sends `body` (a `JsonText`, or a value to write as JSON) with `status`."""
        blocks = list(_json_text(body).blocks())
        length = sum(len(block) for block in blocks)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(length))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        sent = 0
        try:
            for block in blocks:
                view = memoryview(block)
                while view:
                    # Each send waits at most the socket's timeout for the client to take some:
                    # a slow reader gets the whole answer, one that stops reading is cut off
                    # (sendall would bound the whole answer's time by it: 7.3 MB read at
                    # 300 KB/s were cut after 15 s).
                    count = self.connection.send(view)
                    view = view[count:]
                    sent += count
        except OSError as error:
            self.close_connection = True
            logging.warning("REST answer to %s cut off after %d of its %d bytes: %s: %s",
                            self.client_address[0], sent, length, type(error).__name__, error)

    def log_message(self, format, *args):  # noqa: A002 -- the base class's signature
        # Access logs go to debug: one line per request would drown the server's own log.
        logging.debug("%s %s", self.address_string(), format % args)


def _json_text(body):
    """`body` as a `JsonText`: answers are one, or a value (a dict) to write as JSON."""
    return body if isinstance(body, json_tensors.JsonText) else json_tensors.JsonText.of(body)


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
