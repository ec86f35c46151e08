"""`ServingError`: a failed request, carrying the status TF Serving would answer with.

Both front ends raise and catch this one type: gRPC sends `code` as the call's status, REST sends
`http_status` with the body `{"error": message}`, exactly as `tensorflow_model_server` does, so
clients that branch on either keep working.

Example:
    >>> error = ServingError(grpc.StatusCode.NOT_FOUND, "Servable not found for request: Latest(x)")
    >>> error.http_status
    404
"""

import grpc
import tensorflow as tf

# TF Serving's mapping of canonical status codes to HTTP statuses (its REST server's
# ToHTTPStatusCode); FAILED_PRECONDITION and OUT_OF_RANGE are client errors there too.
_HTTP_STATUS = {
    grpc.StatusCode.OK: 200,
    grpc.StatusCode.CANCELLED: 499,
    grpc.StatusCode.UNKNOWN: 500,
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.DEADLINE_EXCEEDED: 504,
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.ALREADY_EXISTS: 409,
    grpc.StatusCode.PERMISSION_DENIED: 403,
    # This server's RESOURCE_EXHAUSTED is "busy, retry" (or, saying so, an answer larger than
    # the whole budget): 503, which HTTP clients retry (TF Serving sends 429).
    grpc.StatusCode.RESOURCE_EXHAUSTED: 503,
    grpc.StatusCode.FAILED_PRECONDITION: 400,
    grpc.StatusCode.ABORTED: 409,
    grpc.StatusCode.OUT_OF_RANGE: 400,
    grpc.StatusCode.UNIMPLEMENTED: 501,
    grpc.StatusCode.INTERNAL: 500,
    grpc.StatusCode.UNAVAILABLE: 503,
    grpc.StatusCode.DATA_LOSS: 500,
    grpc.StatusCode.UNAUTHENTICATED: 401,
}

# TensorFlow's error codes are the canonical codes gRPC uses, number for number.
_CODE_BY_NUMBER = {code.value[0]: code for code in grpc.StatusCode}


class ServingError(Exception):
    """A request that cannot be answered: a `grpc.StatusCode` and a message naming what is wrong."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code
        self.message = message

    @property
    def http_status(self):
        return _HTTP_STATUS[self.code]

    @classmethod
    def from_tf_error(cls, error):
        """The status of a `tf.errors.OpError` raised while running a model (e.g. a strict UTF-8
        decode rejecting its input is INVALID_ARGUMENT), as TF Serving passes it through."""
        if not isinstance(error, tf.errors.OpError):
            raise TypeError(f"expected a tf.errors.OpError, got {type(error).__name__}")
        return cls(_CODE_BY_NUMBER.get(error.error_code, grpc.StatusCode.UNKNOWN),
                   _without_graph_context(error.message))


def _without_graph_context(message):
    """The op's own message ("Invalid formatting on input string"), without the lines eager
    execution wraps around it (which graph, which node, unavailable stack traces)."""
    lines = [line for line in message.splitlines()
             if line.strip() and not line.startswith(("Graph execution error", "Detected at node",
                                                       "<stack traces unavailable>"))
             and "[[{{" not in line]
    return "\n".join(lines) or message
