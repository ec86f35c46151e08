"""`Admission`: how much request data the server holds at once, with a refusal beyond it.

Threads bound how many requests run, not how much memory they take: each request holds its
payload a few times over (the message, the numpy array, the tensor), so 16 requests of 10 MB
are ~0.6 GB. Every request therefore takes its size from a byte budget for as long as it runs;
when the budget is spent the request is refused at once with RESOURCE_EXHAUSTED (HTTP 503),
which clients retry, instead of queueing until the machine runs out of memory.

Example:
    >>> admission = Admission(max_bytes=256 << 20)
    >>> with admission.admit(len(body)):
    ...     answer(body)
"""

import contextlib
import threading

import grpc

from bert_tf.serving.errors import ServingError


class Admission:
    """A byte budget shared by the requests in progress."""

    def __init__(self, max_bytes):
        if max_bytes < 1:
            raise ValueError(f"max_bytes must be at least 1, got {max_bytes}")
        self.max_bytes = max_bytes
        self._held = 0
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def admit(self, nbytes):
        """Holds `nbytes` of the budget for the `with` block; RESOURCE_EXHAUSTED if they are
        not available now."""
        with self._lock:
            if self._held + nbytes > self.max_bytes:
                raise ServingError(
                    grpc.StatusCode.RESOURCE_EXHAUSTED,
                    f"The server is busy: requests in progress hold {self._held} of its "
                    f"{self.max_bytes} bytes for request data and this one needs {nbytes}; "
                    f"retry shortly.")
            self._held += nbytes
        try:
            yield
        finally:
            with self._lock:
                self._held -= nbytes
