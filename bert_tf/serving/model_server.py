"""`ModelServer`: one model served over TF Serving's gRPC and REST APIs, for local use.

Example:
    >>> server = ModelServer(ServerOptions(model_base_path="/models/bert_sst2", port=0,
    ...                                    rest_api_port=0))
    >>> server.start()
    >>> server.port, server.rest_api_port   # the ports actually bound
    (43121, 39447)
    >>> server.stop()
"""

import concurrent.futures
import dataclasses
import errno
import os
import socket
import threading

import grpc

from bert_tf.serving import grpc_service
from bert_tf.serving.admission import Admission
from bert_tf.serving.model_manager import ModelManager
from bert_tf.serving.rest_service import RestApiServer
from bert_tf.thread_pools import size_thread_pools

_THREAD_POOL_OPTIONS = ("tensorflow_intra_op_parallelism", "tensorflow_inter_op_parallelism")


@dataclasses.dataclass
class ServerOptions:
    """What to serve and how; field names are `tensorflow_model_server`'s flags (the batching
    ones, `max_batch_size`, `batch_timeout_micros` and `num_batch_threads`, its batching
    parameters).

    `port` and `rest_api_port` of 0 pick a free port; `rest_api_port=None` serves gRPC only.
    `model_name` defaults to the base path's directory name. `num_batch_threads` batches run at
    once (see `BatchingQueue`). `tensorflow_intra_op_parallelism` and
    `tensorflow_inter_op_parallelism` size TensorFlow's thread pools (0: TensorFlow's choice,
    one thread per core); they can only be set before the process runs its first TensorFlow
    op. Beyond tensorflow_model_server's: `max_queued_requests`, gRPC requests that may wait for
    a worker, or REST connections open beyond the workers (see `rest_service.py`), before new
    ones are refused, and `max_inflight_request_bytes`, the request and answer data that
    requests in progress may hold together (see `admission.py`).
    """

    model_base_path: str
    model_name: str = ""
    host: str = "127.0.0.1"
    port: int = 8500
    rest_api_port: int | None = 8501
    max_batch_size: int = 32
    batch_timeout_micros: int = 2000
    num_batch_threads: int = 1
    tensorflow_intra_op_parallelism: int = 0
    tensorflow_inter_op_parallelism: int = 0
    max_request_bytes: int = 16 << 20
    file_system_poll_wait_seconds: float = 1.0
    max_queued_requests: int = 64
    max_inflight_request_bytes: int = 256 << 20

    def __post_init__(self):
        self.model_base_path = os.path.abspath(self.model_base_path)
        if not self.model_name:
            self.model_name = os.path.basename(self.model_base_path)
        if self.num_batch_threads < 1:
            raise ValueError(f"num_batch_threads must be at least 1, got {self.num_batch_threads}")
        if self.port and self.port == self.rest_api_port:
            raise ValueError(f"--port and --rest_api_port are both {self.port}: gRPC and REST "
                             f"need a port each.")
        if self.max_inflight_request_bytes < self.max_request_bytes:
            raise ValueError(f"max_inflight_request_bytes ({self.max_inflight_request_bytes}) "
                             f"must be at least max_request_bytes ({self.max_request_bytes}), "
                             f"or the largest requests could never run.")

    @property
    def num_request_threads(self):
        """Workers per front end. Every request in a batch, running or being collected, holds
        one: enough for each batch thread to run a full batch while the next one fills."""
        return (self.num_batch_threads + 1) * self.max_batch_size + 8


class ModelServer:
    """Starts and stops the model manager, the gRPC server and the REST server together."""

    def __init__(self, options):
        if not os.path.isdir(options.model_base_path):
            raise FileNotFoundError(f"--model_base_path {options.model_base_path} is not a "
                                    f"directory (expected <model_base_path>/<version>/"
                                    f"saved_model.pb)")
        size_thread_pools(options.tensorflow_intra_op_parallelism,
                          options.tensorflow_inter_op_parallelism, _THREAD_POOL_OPTIONS)
        self.options = options
        self.manager = ModelManager(options.model_name, options.model_base_path,
                                    options.max_batch_size, options.batch_timeout_micros,
                                    options.num_batch_threads,
                                    options.file_system_poll_wait_seconds)
        self.admission = Admission(options.max_inflight_request_bytes)
        self.port = None
        self.rest_api_port = None
        self._grpc_server = None
        self._rest_server = None
        self._rest_thread = None

    def start(self):
        """Loads the newest version, then opens the ports (as TF Serving, clients never see a
        server that has not tried its first load). An address that cannot be bound (a port in
        use, a host not of this machine) is refused first (OSError), before any load; one that
        still cannot be bound raises RuntimeError/OSError, having stopped whatever had
        started."""
        _refuse_unusable_addresses(self.options.host,
                                   {"port": self.options.port,
                                    "rest_api_port": self.options.rest_api_port})
        self.manager.start()
        try:
            self._start_grpc()
            if self.options.rest_api_port is not None:
                self._start_rest()
        except BaseException:
            self.stop()
            raise

    def _start_grpc(self):
        options = self.options
        workers = options.num_request_threads
        self._grpc_server = grpc.server(
            concurrent.futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="grpc"),
            # RPCs beyond the workers and the queue are refused with RESOURCE_EXHAUSTED.
            maximum_concurrent_rpcs=workers + options.max_queued_requests,
            interceptors=[grpc_service.UndecodableRequests()],
            options=[("grpc.max_receive_message_length", options.max_request_bytes),
                     ("grpc.max_send_message_length", -1),
                     # Without this a second server could silently share the port.
                     ("grpc.so_reuseport", 0)])
        grpc_service.add_services(self._grpc_server, self.manager, self.admission)
        self.port = self._grpc_server.add_insecure_port(f"{_host(options.host)}:{options.port}")
        self._grpc_server.start()

    def _start_rest(self):
        options = self.options
        self._rest_server = RestApiServer(self.manager, self.admission, options.host,
                                          options.rest_api_port, options.max_request_bytes,
                                          options.num_request_threads,
                                          options.max_queued_requests)
        self.rest_api_port = self._rest_server.server_address[1]
        self._rest_thread = threading.Thread(target=self._rest_server.serve_forever,
                                             name="rest", daemon=True)
        self._rest_thread.start()

    def stop(self, grace_seconds=5.0):
        """Stops taking requests, lets running ones finish (up to `grace_seconds`), unloads."""
        # Both servers stop taking requests at once and share the grace period.
        grpc_stopped = (self._grpc_server.stop(grace_seconds)
                        if self._grpc_server is not None else None)
        if self._rest_thread is not None:
            self._rest_server.shutdown()
            self._rest_thread.join()
        if self._rest_server is not None:
            self._rest_server.server_close(grace_seconds)
        if grpc_stopped is not None:
            grpc_stopped.wait()
        self.manager.stop()


def _refuse_unusable_addresses(host, ports):
    """Raises OSError naming the option at fault when a port of `ports` (option name -> port;
    None is not served, 0 any free port) cannot be bound on `host`: --host when it does not
    resolve or is not an address of this machine, the port's option when another process
    listens there (or binding it is not allowed). gRPC would only say "Failed to bind" after
    printing a line of its own, and the REST server "[Errno 98] Address already in use" without
    the port, both after loading the model."""
    for name, port in ports.items():
        if port is None:
            continue
        try:
            addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                           flags=socket.AI_PASSIVE)
        except socket.gaierror as error:
            raise OSError(f"--host {host}: {error.strerror}") from None
        for family, kind, protocol, _, address in addresses:
            with socket.socket(family, kind, protocol) as probe:
                # As both servers bind: a port left in TIME_WAIT by a server that stopped is
                # free to them.
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                try:
                    probe.bind(address)
                except OSError as error:
                    if error.errno == errno.EADDRINUSE:
                        raise OSError(f"--{name} {port}: {_host(host)}:{port} is already in "
                                      f"use (another process listens there); stop it or pick "
                                      f"another port") from None
                    if error.errno == errno.EADDRNOTAVAIL:
                        raise OSError(f"--host {host}: not an address of this machine "
                                      f"({error.strerror}); use 127.0.0.1, 0.0.0.0 or an "
                                      f"address of one of its interfaces") from None
                    raise OSError(f"--{name} {port}: cannot bind {_host(host)}:{port}: "
                                  f"{error.strerror}") from None


def _host(host):
    # gRPC wants IPv6 literals in brackets ("[::1]:8500").
    return f"[{host}]" if ":" in host and not host.startswith("[") else host
