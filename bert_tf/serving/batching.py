"""`BatchingQueue`: merges concurrent requests into one model call, like TF Serving's batching.

A model runs a batch of 32 rows in far less than 32 times the time of one row, so a server that
runs every request alone wastes most of the machine under load. Each request (a dict of arrays
that share dimension 0) waits at most `batch_timeout_micros` after the oldest waiting request
arrived; the requests then run together as one batch of at most `max_batch_size` rows and each
caller gets back exactly its own rows.

Example:
    >>> queue = BatchingQueue(lambda batch: {"y": batch["x"] * 2}, max_batch_size=8,
    ...                       batch_timeout_micros=1000)
    >>> queue.submit({"x": np.array([1, 2])})
    {'y': array([2, 4])}
    >>> queue.close()
"""

import collections
import threading
import time

import grpc
import numpy as np

from bert_tf.serving.errors import ServingError


class _Task:
    """One caller's request, waiting for its rows of a batch's outputs."""

    def __init__(self, inputs, rows):
        self.inputs = inputs
        self.rows = rows
        # Only requests whose tensors agree beyond dimension 0 can be concatenated.
        self.merge_key = tuple(sorted((name, array.dtype.str, array.shape[1:])
                                      for name, array in inputs.items()))
        self.arrived = time.monotonic()
        self.outputs = None
        self.error = None
        self.done = threading.Event()

    def finish(self, outputs=None, error=None):
        self.outputs, self.error = outputs, error
        self.done.set()


class BatchingQueue:
    """Runs `run_batch(inputs) -> outputs` on merged requests in one worker thread.

    `run_batch` takes and returns dicts of arrays; every output must have the batch's rows as
    dimension 0 so that it can be split back among the callers. `submit` blocks its caller until
    its rows are done. `close` runs what is already queued, then stops the worker.
    """

    def __init__(self, run_batch, max_batch_size, batch_timeout_micros, name="batching"):
        if max_batch_size < 1:
            raise ValueError(f"max_batch_size must be at least 1, got {max_batch_size}")
        if batch_timeout_micros < 0:
            raise ValueError(f"batch_timeout_micros must be >= 0, got {batch_timeout_micros}")
        self.max_batch_size = max_batch_size
        self._run_batch = run_batch
        self._timeout = batch_timeout_micros / 1e6
        self._pending = collections.deque()
        self._condition = threading.Condition()
        self._closed = False
        self._worker = threading.Thread(target=self._work, name=name, daemon=True)
        self._worker.start()

    def submit(self, inputs):
        """Runs `inputs` in some batch and returns this request's rows of the outputs.

        Raises INVALID_ARGUMENT unless every input has the same dimension 0 of 1 to
        `max_batch_size` rows: that dimension is what batches are merged and split along.
        """
        rows = self._rows(inputs)
        task = _Task(inputs, rows)
        with self._condition:
            if self._closed:
                raise ServingError(grpc.StatusCode.UNAVAILABLE,
                                   "This model version is unloading; retry the request.")
            self._pending.append(task)
            self._condition.notify()
        task.done.wait()
        if task.error is not None:
            raise task.error
        return task.outputs

    def _rows(self, inputs):
        if not inputs:
            raise ServingError(grpc.StatusCode.INVALID_ARGUMENT, "The request has no inputs.")
        for name, array in inputs.items():
            if array.ndim == 0:
                raise ServingError(
                    grpc.StatusCode.INVALID_ARGUMENT,
                    f"Input '{name}' is a scalar; requests are batched along dimension 0, so "
                    f"every input needs a leading batch dimension.")
        rows = {name: array.shape[0] for name, array in inputs.items()}
        if len(set(rows.values())) != 1:
            raise ServingError(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"Inputs have different batch sizes (dimension 0): "
                f"{', '.join(f'{name}={n}' for name, n in sorted(rows.items()))}.")
        (count,) = set(rows.values())
        if count == 0:
            raise ServingError(grpc.StatusCode.INVALID_ARGUMENT,
                               "Empty batch: the request has 0 rows; send at least one.")
        if count > self.max_batch_size:
            raise ServingError(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"Batch of {count} rows is larger than the maximum batch size "
                f"{self.max_batch_size} (--max_batch_size); split the request.")
        return count

    def close(self):
        """Stops taking requests, finishes the queued ones and joins the worker."""
        with self._condition:
            self._closed = True
            self._condition.notify()
        self._worker.join()

    def _work(self):
        while True:
            batch = self._next_batch()
            if batch is None:
                return
            self._run(batch)

    def _next_batch(self):
        """Waits for the oldest request, then gathers compatible ones until the batch is full or
        the oldest has waited `batch_timeout_micros`; None once closed and drained."""
        with self._condition:
            while not self._pending and not self._closed:
                self._condition.wait()
            if not self._pending:
                return None
            batch = [self._pending.popleft()]
            rows = batch[0].rows
            deadline = batch[0].arrived + self._timeout
            while True:
                rows, full = self._take_compatible(batch, rows)
                remaining = deadline - time.monotonic()
                if full or self._closed or remaining <= 0:
                    return batch
                self._condition.wait(remaining)

    def _take_compatible(self, batch, rows):
        """Moves the waiting requests that can join `batch` into it, oldest first; `full` says a
        compatible request had to be left for the next batch (or no row is left)."""
        full = False
        kept = collections.deque()
        for task in self._pending:
            if task.merge_key != batch[0].merge_key:
                kept.append(task)
            elif rows + task.rows <= self.max_batch_size:
                batch.append(task)
                rows += task.rows
            else:
                kept.append(task)
                full = True
        self._pending = kept
        return rows, full or rows == self.max_batch_size

    def _run(self, batch):
        try:
            results = self._run_merged(batch)
        except Exception as error:  # noqa: BLE001 -- every waiting caller must get an answer
            if not isinstance(error, ServingError):
                error = ServingError(grpc.StatusCode.INTERNAL, f"{type(error).__name__}: {error}")
            if len(batch) == 1:
                batch[0].finish(error=error)
                return
            # A merged batch fails as a whole when one request's data makes the model raise (e.g.
            # bytes a strict UTF-8 decode rejects). Running each request alone confines the error
            # to the request that caused it: valid requests never fail because of a neighbour.
            for task in batch:
                self._run([task])
            return
        for task, outputs in zip(batch, results):
            task.finish(outputs=outputs)

    def _run_merged(self, batch):
        if len(batch) == 1:
            inputs = batch[0].inputs
        else:
            inputs = {name: np.concatenate([task.inputs[name] for task in batch])
                      for name in batch[0].inputs}
        outputs = self._run_batch(inputs)
        total = sum(task.rows for task in batch)
        for name, array in outputs.items():
            if array.ndim == 0 or array.shape[0] != total:
                raise ServingError(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    f"Output '{name}' has shape {list(array.shape)} for a batch of {total} rows; "
                    f"a batched signature must return [batch, ...] outputs.")
        splits = np.cumsum([task.rows for task in batch])[:-1]
        per_output = {name: np.split(array, splits) for name, array in outputs.items()}
        return [{name: parts[i] for name, parts in per_output.items()} for i in range(len(batch))]
