"""`TraceScope`: a per-thread switch that layers read when a function is traced.

A `with` block turns it on for the calling thread (blocks nest); layers ask `active()` while
they build a graph, so the scope decides what a traced function computes, not what runs later.
`real_tokens_only()` and `portable_graphs()` are two such scopes.

Example:
    >>> scope = TraceScope()
    >>> with scope.entered():
    ...     scope.active()
    True
"""

import contextlib
import threading


class TraceScope:
    """A switch, off by default, on inside `with scope.entered():` in that thread only."""

    def __init__(self):
        self._local = threading.local()

    @contextlib.contextmanager
    def entered(self):
        previous = self.active()
        self._local.on = True
        try:
            yield
        finally:
            self._local.on = previous

    def active(self):
        """Whether the calling thread is inside `entered()`."""
        return getattr(self._local, "on", False)
