"""`Admission`: how much request and answer data the server holds at once, with a refusal
beyond it.

Threads bound how many requests run, not how much memory they take: each request holds its
payload a few times over (the message, the numpy array, the tensor), so 16 requests of 10 MB
are ~0.6 GB, and an answer can be far larger than its request (8.7 KB asking an encoder's `mlm`
signature for 512 positions were answered with 338 MB of JSON). Every request therefore takes
its size from a byte budget while it runs, then its answer its size until it is sent (REST: the
JSON text's bound, taken before any of it is written; gRPC: the response message). When the
budget is spent the request is refused at once with RESOURCE_EXHAUSTED (HTTP 503), which
clients retry, instead of queueing until the machine runs out of memory; an answer larger than
the whole budget is refused saying that retrying cannot help.

Not counted: the output tensors an answer is made from, which exist before it can be checked.
They are bounded by --max_batch_size and the model: a BERT-base encoder's outputs for 32 rows
of 512 tokens are 50 MB a layer (`sequence_output` and 12 `encoder_outputs_*`: 650 MB), its
`mlm_logits` for 512 positions 62.5 MB a row (2 GB for 32). A smaller --max_batch_size is what
bounds them.

Example:
    >>> admission = Admission(max_bytes=256 << 20)
    >>> with admission.admit(len(body), "this request"):
    ...     answer(body)
"""

import contextlib
import threading

import grpc

from bert_tf.serving.errors import ServingError


class Admission:
    """A byte budget shared by the requests and answers in progress."""

    def __init__(self, max_bytes):
        if max_bytes < 1:
            raise ValueError(f"max_bytes must be at least 1, got {max_bytes}")
        self.max_bytes = max_bytes
        self._held = 0
        self._lock = threading.Lock()

    @property
    def held(self):
        """The bytes the requests and answers in progress hold now."""
        with self._lock:
            return self._held

    def take(self, nbytes, what):
        """Takes `nbytes` of the budget for `what` (a noun phrase for messages: "this request")
        and returns the function that gives them back, to be called once; RESOURCE_EXHAUSTED if
        they are not available now."""
        with self._lock:
            if nbytes > self.max_bytes:
                raise ServingError(
                    grpc.StatusCode.RESOURCE_EXHAUSTED,
                    f"The server cannot hold {what}: it needs {nbytes} bytes, more than the "
                    f"{self.max_bytes} that requests in progress may hold together "
                    f"(--max_inflight_request_bytes); ask for less, or raise that flag.")
            if self._held + nbytes > self.max_bytes:
                raise ServingError(
                    grpc.StatusCode.RESOURCE_EXHAUSTED,
                    f"The server is busy: requests in progress hold {self._held} of its "
                    f"{self.max_bytes} bytes for requests and answers and {what} needs "
                    f"{nbytes}; retry shortly.")
            self._held += nbytes

        def release():
            with self._lock:
                self._held -= nbytes
        return release

    @contextlib.contextmanager
    def admit(self, nbytes, what):
        """Holds `nbytes` of the budget for the `with` block (see `take`)."""
        release = self.take(nbytes, what)
        try:
            yield
        finally:
            release()
