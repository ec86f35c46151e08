"""`BatchingQueue`: merges concurrent requests into one model call, like TF Serving's batching.

A model runs a batch of 32 rows in far less than 32 times the time of one row, so a server that
runs every request alone wastes most of the machine under load. Each request (a dict of arrays
that share dimension 0) waits at most `batch_timeout_micros` after the oldest waiting request
arrived; the requests then run together as one batch of at most `max_batch_size` sequences and
each caller gets back exactly its own rows. A request's size in sequences is its rows, or the
most strings one of its inputs holds when that is more: each string is a text that this
package's exports pack into one sequence, cut to what their `seq_length` can use, so strings
bound what a request claims. A multiple-choice request of 2 rows of 4 `choices` is 8 sequences
(one row of 20,000 choices, when only rows were counted, ran for 220 s and grew the server from
1 to 9.3 GB). A model whose strings each make up to `sequences_per_string` sequences (a SQuAD
export reads a context in up to `max_windows` windows) counts each string that many times: 32
questions about 3000-word contexts, counted as 32, ran 512 sequences in one call. A request of
more than `max_batch_size` sequences, or with an empty input, is refused before it is queued;
for a model that runs its sequences in slices of bounded memory (`runs_in_slices`: this
package's task exports, `bert_tf.export.model_slices`) only its strings are held to
`max_batch_size`, and a request of more sequences than a batch holds runs in a batch of its
own: 3 SQuAD questions of up to 16 windows each are served, not refused at 32.

`num_batch_threads` batches run at once; when a batch closes while other batch threads are idle,
its requests are shared out among them (see `BatchingQueue`).

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

    def __init__(self, inputs, rows, size):
        self.inputs = inputs
        self.rows = rows
        self.size = size  # the sequences it makes the model run (see the module docstring)
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
    """Runs `run_batch(inputs) -> outputs` on merged requests in `num_batch_threads` workers.

    `run_batch` takes and returns dicts of arrays; every output must have the batch's rows as
    dimension 0 so that it can be split back among the callers. `submit` blocks its caller until
    its rows are done. `close` runs what is already queued, then stops the workers.

    One worker at a time collects a batch (from the oldest request until the batch is full or
    that request's timeout). When it closes, the batch's requests are divided, by size and in
    arrival order, between that worker and the workers idle at that moment, and the parts run
    at once. On a CPU a small batch gains less from an op spread over cores than from several
    batches each on its own core: eight SST-2 sentences on the MiniLM classifier took 29 ms as
    one batch with TensorFlow's two intra-op threads; as two batches of four, each on a worker
    with one intra-op thread, 19.5 ms and 1.5x the texts per second (2-vCPU Xeon, idle). Pair
    `num_batch_threads` with the `--tensorflow_intra_op_parallelism` that makes their product
    the number of cores.
    """

    def __init__(self, run_batch, max_batch_size, batch_timeout_micros, num_batch_threads=1,
                 name="batching", sequences_per_string=1, runs_in_slices=False):
        if max_batch_size < 1:
            raise ValueError(f"max_batch_size must be at least 1, got {max_batch_size}")
        if batch_timeout_micros < 0:
            raise ValueError(f"batch_timeout_micros must be >= 0, got {batch_timeout_micros}")
        if num_batch_threads < 1:
            raise ValueError(f"num_batch_threads must be at least 1, got {num_batch_threads}")
        self.max_batch_size = max_batch_size
        self.sequences_per_string = sequences_per_string
        self.runs_in_slices = runs_in_slices
        self._run_batch = run_batch
        self._timeout = batch_timeout_micros / 1e6
        self._pending = collections.deque()
        self._handed_out = collections.deque()  # parts of a closed batch for idle workers
        self._collecting = False  # a worker is gathering a batch
        self._idle = 0  # workers waiting for work
        self._condition = threading.Condition()
        self._closed = False
        self._workers = [threading.Thread(target=self._work, name=f"{name}-{i}", daemon=True)
                         for i in range(num_batch_threads)]
        for worker in self._workers:
            worker.start()

    def submit(self, inputs):
        """Runs `inputs` in some batch and returns this request's rows of the outputs.

        Raises INVALID_ARGUMENT unless every input has the same dimension 0 (what batches are
        merged and split along) and at least one value, and the request makes at most
        `max_batch_size` sequences (strings, when the model `runs_in_slices`: see the module
        docstring).
        """
        task = _Task(inputs, *self._rows_and_size(inputs))
        with self._condition:
            if self._closed:
                raise ServingError(grpc.StatusCode.UNAVAILABLE,
                                   "This model version is unloading; retry the request.")
            self._pending.append(task)
            # All: the worker collecting a batch must see it, not only an idle one.
            self._condition.notify_all()
        task.done.wait()
        if task.error is not None:
            raise task.error
        return task.outputs

    def _rows_and_size(self, inputs):
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
        for name, array in sorted(inputs.items()):
            if array.size == 0:
                raise ServingError(
                    grpc.StatusCode.INVALID_ARGUMENT,
                    f"Input '{name}' has shape {list(array.shape)}, which holds no values; send "
                    f"at least one per row.")
        if count > self.max_batch_size:
            raise ServingError(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"Batch of {count} rows is larger than the maximum batch size "
                f"{self.max_batch_size} (--max_batch_size); split the request.")
        strings, name = max(((array.size, name) for name, array in inputs.items()
                             if array.dtype.kind in "OSU"), default=(None, None))
        size = count if strings is None else strings * self.sequences_per_string
        if size > self.max_batch_size and not (self.runs_in_slices
                                               and strings <= self.max_batch_size):
            per_string = ("a sequence per string" if self.sequences_per_string == 1 else
                          f"up to {self.sequences_per_string} sequences per string ({size})")
            raise ServingError(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"Input '{name}' holds {strings} strings (shape {list(inputs[name].shape)}): the "
                f"model runs {per_string}, at most {self.max_batch_size} in one call "
                f"(--max_batch_size); split the request.")
        return count, size

    def close(self):
        """Stops taking requests, finishes the queued ones and joins the workers."""
        with self._condition:
            self._closed = True
            self._condition.notify_all()
        for worker in self._workers:
            worker.join()

    def _work(self):
        while True:
            batch = self._next_batch()
            if batch is None:
                return
            self._run(batch)

    def _next_batch(self):
        """This worker's next requests to run: a part handed out by another worker, or a batch
        it collects itself (see the class docstring); None once closed and drained."""
        with self._condition:
            self._idle += 1
            while not self._handed_out and (self._collecting or not self._pending):
                if self._closed and not self._pending and not self._collecting:
                    self._idle -= 1
                    return None
                self._condition.wait()
            self._idle -= 1
            if self._handed_out:
                return self._handed_out.popleft()
            self._collecting = True
            batch = self._collect()
            self._collecting = False
            first, *others = _divide(batch, 1 + self._idle)
            self._handed_out.extend(others)
            self._condition.notify_all()
            return first

    def _collect(self):
        """Takes the oldest request, then gathers compatible ones until the batch is full or the
        oldest has waited `batch_timeout_micros` (called holding the lock)."""
        batch = [self._pending.popleft()]
        size = batch[0].size
        deadline = batch[0].arrived + self._timeout
        while True:
            size, full = self._take_compatible(batch, size)
            remaining = deadline - time.monotonic()
            if full or self._closed or remaining <= 0:
                return batch
            self._condition.wait(remaining)

    def _take_compatible(self, batch, size):
        """Moves the waiting requests that can join `batch` (of `size` sequences) into it,
        oldest first; `full` says a compatible request had to be left for the next batch (or no
        room is left)."""
        full = False
        kept = collections.deque()
        for task in self._pending:
            if task.merge_key != batch[0].merge_key:
                kept.append(task)
            elif size + task.size <= self.max_batch_size:
                batch.append(task)
                size += task.size
            else:
                kept.append(task)
                full = True
        self._pending = kept
        return size, full or size == self.max_batch_size

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


def _divide(batch, ways):
    """`batch` (tasks in arrival order) as up to `ways` consecutive non-empty parts of about
    equal size (sequences).

    Example: tasks of 1, 1, 2 and 4 sequences in two ways -> [1, 1, 2] and [4].
    """
    ways = min(ways, len(batch))
    total = sum(task.size for task in batch)
    parts, part, size = [], [], 0
    for index, task in enumerate(batch):
        part.append(task)
        size += task.size
        tasks_left, parts_left = len(batch) - index - 1, ways - len(parts) - 1
        # Close the part at its share of the sequences, or when each later part needs a task.
        if parts_left and (size >= total * (len(parts) + 1) / ways or tasks_left == parts_left):
            parts.append(part)
            part = []
    parts.append(part)
    return parts
