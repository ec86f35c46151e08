"""BatchingQueue: concurrent requests share model calls, each caller gets exactly its rows."""

import threading
import time

import grpc
import numpy as np
import pytest

from bert_tf.serving.batching import BatchingQueue, _divide, _Task
from bert_tf.serving.errors import ServingError


class RecordingModel:
    """y = 10 * x; records the batch sizes it was called with. Rows equal to -1 make it raise,
    like a model rejecting one request's data."""

    def __init__(self, delay=0.0):
        self.batch_sizes = []
        self.delay = delay

    def __call__(self, inputs):
        self.batch_sizes.append(len(inputs["x"]))
        time.sleep(self.delay)
        if (inputs["x"] == -1).any():
            raise ServingError(grpc.StatusCode.INVALID_ARGUMENT, "x must not be -1")
        return {"y": inputs["x"] * 10}


def submit_concurrently(queue, requests):
    """Submits every request from its own thread; returns each one's result or ServingError."""
    results = [None] * len(requests)

    def call(i):
        try:
            results[i] = queue.submit(requests[i])
        except ServingError as error:
            results[i] = error

    threads = [threading.Thread(target=call, args=(i,)) for i in range(len(requests))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return results


def submit_concurrently_then_close(queue, requests):
    """`submit_concurrently`'s results; the queue is closed afterwards, whatever happened."""
    try:
        return submit_concurrently(queue, requests)
    finally:
        queue.close()


def submit_refused_then_close(queue, inputs):
    """The `ServingError` that submitting `inputs` raises; the queue is closed afterwards."""
    try:
        with pytest.raises(ServingError) as raised:
            queue.submit(inputs)
    finally:
        queue.close()
    return raised.value


def assert_each_got_its_rows(requests, results):
    """Each caller got `RecordingModel`'s answer to exactly its own rows."""
    for request, result in zip(requests, results, strict=True):
        np.testing.assert_array_equal(result["y"], request["x"] * 10)


def test_concurrent_requests_are_merged_and_split_back():
    model = RecordingModel()
    # A long timeout: all 6 requests arrive well within it.
    queue = BatchingQueue(model, max_batch_size=8, batch_timeout_micros=500_000)
    requests = [{"x": np.arange(i, i + 1 + i % 2)} for i in range(6)]  # 1 or 2 rows each
    results = submit_concurrently_then_close(queue, requests)
    assert_each_got_its_rows(requests, results)
    assert sum(model.batch_sizes) == 9
    assert max(model.batch_sizes) <= 8
    assert len(model.batch_sizes) < len(requests)  # some requests shared a call


def test_a_lone_request_runs_after_the_timeout():
    model = RecordingModel()
    queue = BatchingQueue(model, max_batch_size=8, batch_timeout_micros=1000)
    try:
        result = queue.submit({"x": np.array([3])})
    finally:
        queue.close()
    np.testing.assert_array_equal(result["y"], [30])
    assert model.batch_sizes == [1]


def test_requests_with_different_trailing_shapes_run_in_separate_batches():
    model = RecordingModel(delay=0.05)
    queue = BatchingQueue(model, max_batch_size=8, batch_timeout_micros=200_000)
    requests = [{"x": np.ones([1, 2])}, {"x": np.ones([1, 3])}, {"x": np.ones([2, 2])}]
    results = submit_concurrently_then_close(queue, requests)
    assert_each_got_its_rows(requests, results)
    assert sorted(model.batch_sizes) in ([1, 3], [1, 1, 2])


def test_one_bad_request_does_not_fail_the_requests_batched_with_it():
    model = RecordingModel()
    queue = BatchingQueue(model, max_batch_size=8, batch_timeout_micros=2_000_000)
    requests = [{"x": np.array([1])}, {"x": np.array([-1])}, {"x": np.array([2, 3])},
                {"x": np.array([4])}, {"x": np.array([5, 6, 7])}]
    results = submit_concurrently_then_close(queue, requests)
    assert isinstance(results[1], ServingError)
    assert results[1].code == grpc.StatusCode.INVALID_ARGUMENT
    assert results[1].message == "x must not be -1"
    for i in (0, 2, 3, 4):
        np.testing.assert_array_equal(results[i]["y"], requests[i]["x"] * 10)


@pytest.mark.parametrize("inputs, message", [
    ({"x": np.zeros([0])}, "Empty batch: the request has 0 rows"),
    ({"x": np.zeros([9])}, "Batch of 9 rows is larger than the maximum batch size 8"),
    ({"x": np.zeros([2]), "z": np.zeros([3])},
     "Inputs have different batch sizes (dimension 0): x=2, z=3"),
    ({"x": np.float32(1)}, "Input 'x' is a scalar"),
    ({"x": np.zeros([2]), "choices": np.zeros([2, 0], object)},
     "Input 'choices' has shape [2, 0], which holds no values; send at least one per row."),
    ({"context": np.full([1], "c", object), "choices": np.full([1, 9], "a", object)},
     "Input 'choices' holds 9 strings (shape [1, 9]): the model runs a sequence per string, at "
     "most 8 in one call (--max_batch_size); split the request."),
    ({"choices": np.full([3, 3], "a", object)}, "Input 'choices' holds 9 strings (shape [3, 3])"),
])
def test_requests_that_cannot_be_batched_are_invalid_arguments(inputs, message):
    model = RecordingModel()
    queue = BatchingQueue(model, max_batch_size=8, batch_timeout_micros=0)
    error = submit_refused_then_close(queue, inputs)
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT
    assert message in error.message
    assert model.batch_sizes == []


def test_a_batch_holds_at_most_max_batch_size_strings_of_an_input():
    # Each string is a sequence the model runs: 3 requests of 3 choices cannot share a batch of 8.
    model_sizes = []

    def count_choices(inputs):
        model_sizes.append(inputs["choices"].size)
        return {"n": np.full(len(inputs["choices"]), inputs["choices"].shape[1])}

    queue = BatchingQueue(count_choices, max_batch_size=8, batch_timeout_micros=500_000)
    requests = [{"choices": np.full([1, 3], "a", object)} for _ in range(3)]
    results = submit_concurrently_then_close(queue, requests)
    assert [result["n"].tolist() for result in results] == [[3]] * 3
    assert sorted(model_sizes) == [3, 6]


def test_strings_of_several_sequences_each_count_as_many():
    # A SQuAD export reads a context in up to max_windows windows (here 4): 3 questions make up
    # to 12 sequences; 2 of them fill a batch of 8, 3 are refused.
    model_rows = []

    def answer(inputs):
        model_rows.append(len(inputs["context"]))
        return {"n": np.zeros(len(inputs["context"]))}

    queue = BatchingQueue(answer, max_batch_size=8, batch_timeout_micros=500_000,
                          sequences_per_string=4)
    error = submit_refused_then_close(queue, {"question": np.full([3], "q", object),
                                              "context": np.full([3], "c", object)})
    assert error.message.startswith(
        "Input 'question' holds 3 strings (shape [3]): the model runs up to 4 sequences per "
        "string (12), at most 8 in one call (--max_batch_size)")
    queue = BatchingQueue(answer, max_batch_size=8, batch_timeout_micros=500_000,
                          sequences_per_string=4)
    requests = [{"context": np.full([1], "c", object)} for _ in range(3)]
    submit_concurrently_then_close(queue, requests)
    assert sorted(model_rows) == [1, 2]


def test_a_model_in_slices_takes_as_many_strings_as_a_batch_and_runs_a_large_request_alone():
    # This package's SQuAD export runs its windows in slices of bounded memory: 3 questions of
    # up to 4 windows each (12) are served, in a batch of their own, while single questions
    # still share batches of up to 8 sequences; more strings than a batch holds are refused.
    model_rows = []

    def answer(inputs):
        model_rows.append(len(inputs["context"]))
        time.sleep(0.05)
        return {"n": np.arange(len(inputs["context"]))}

    queue = BatchingQueue(answer, max_batch_size=8, batch_timeout_micros=200_000,
                          sequences_per_string=4, runs_in_slices=True)
    large = {"question": np.full([3], "q", object), "context": np.full([3], "c", object)}
    small = [{"question": np.full([1], "q", object), "context": np.full([1], "c", object)}
             for _ in range(2)]
    results = submit_concurrently_then_close(queue, [large, *small])
    assert results[0]["n"].tolist() == [0, 1, 2]
    assert sorted(result["n"].tolist() for result in results[1:]) == [[0], [1]]
    assert sorted(model_rows) == [2, 3]

    queue = BatchingQueue(answer, max_batch_size=8, batch_timeout_micros=0,
                          sequences_per_string=4, runs_in_slices=True)
    error = submit_refused_then_close(queue, {"question": np.full([9], "q", object),
                                              "context": np.full([9], "c", object)})
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT
    assert error.message.startswith("Batch of 9 rows is larger than the maximum batch size 8")


def test_outputs_without_the_batch_dimension_are_reported():
    queue = BatchingQueue(lambda inputs: {"total": inputs["x"].sum()}, max_batch_size=8,
                          batch_timeout_micros=0)
    error = submit_refused_then_close(queue, {"x": np.ones([2])})
    assert error.code == grpc.StatusCode.FAILED_PRECONDITION
    assert "Output 'total' has shape [] for a batch of 2 rows" in error.message


def test_a_failing_model_gets_an_internal_error_not_a_hang():
    def broken(inputs):
        raise RuntimeError("boom")

    queue = BatchingQueue(broken, max_batch_size=4, batch_timeout_micros=0)
    error = submit_refused_then_close(queue, {"x": np.ones([1])})
    assert error.code == grpc.StatusCode.INTERNAL
    assert error.message == "RuntimeError: boom"


@pytest.mark.parametrize("num_batch_threads", [1, 3])
def test_close_finishes_queued_requests_then_refuses_new_ones(num_batch_threads):
    model = RecordingModel(delay=0.1)
    queue = BatchingQueue(model, max_batch_size=1, batch_timeout_micros=0,
                          num_batch_threads=num_batch_threads)
    results = []
    threads = [threading.Thread(target=lambda: results.append(queue.submit({"x": np.ones([1])})))
               for _ in range(3)]
    for thread in threads:
        thread.start()
    time.sleep(0.2)  # let them queue; close must still answer all three
    queue.close()
    for thread in threads:
        thread.join(timeout=10)
    assert len(results) == 3
    with pytest.raises(ServingError) as raised:
        queue.submit({"x": np.ones([1])})
    assert raised.value.code == grpc.StatusCode.UNAVAILABLE


def test_a_closed_batch_is_shared_out_among_idle_batch_threads():
    # Each part waits at the barrier for the other: the parts pass only if they run at once.
    both_running = threading.Barrier(2, timeout=20)
    model = RecordingModel()
    threads = []

    def run_part(inputs):
        threads.append(threading.current_thread().name)
        both_running.wait()
        return model(inputs)

    queue = BatchingQueue(run_part, max_batch_size=6, batch_timeout_micros=5_000_000,
                          num_batch_threads=2)
    requests = [{"x": np.array([1, 2])}, {"x": np.array([3])}, {"x": np.array([4])},
                {"x": np.array([5, 6])}]  # 6 rows: the batch closes full, before the timeout
    results = submit_concurrently_then_close(queue, requests)
    assert_each_got_its_rows(requests, results)
    assert sorted(model.batch_sizes) == [3, 3]
    assert len(set(threads)) == 2


def test_a_batch_runs_whole_when_no_other_batch_thread_is_idle():
    blocking, release = threading.Event(), threading.Event()
    model = RecordingModel()

    def run(inputs):
        if (inputs["x"] == 0).any():  # holds one batch thread until the end
            blocking.set()
            release.wait(timeout=20)
        return model(inputs)

    queue = BatchingQueue(run, max_batch_size=4, batch_timeout_micros=5_000_000,
                          num_batch_threads=2)
    blocker = threading.Thread(target=queue.submit, args=({"x": np.zeros([4])},))
    blocker.start()
    assert blocking.wait(timeout=20)
    try:
        results = submit_concurrently(queue, [{"x": np.array([i])} for i in range(1, 5)])
    finally:
        release.set()
        blocker.join(timeout=20)
        queue.close()
    assert [result["y"].tolist() for result in results] == [[10], [20], [30], [40]]
    assert model.batch_sizes == [4, 4]  # the four ran as one call (then the blocker's)


@pytest.mark.parametrize("rows, ways, parts", [
    ([1, 1, 2, 4], 2, [[1, 1, 2], [4]]),
    ([1] * 8, 2, [[1] * 4, [1] * 4]),
    ([5, 1, 1], 3, [[5], [1], [1]]),
    ([1, 1, 1, 5], 2, [[1, 1, 1], [5]]),
    ([3, 1], 5, [[3], [1]]),                # never more parts than requests
    ([2, 2], 1, [[2, 2]]),
])
def test_divide_keeps_arrival_order_and_balances_rows(rows, ways, parts):
    batch = [_Task({"x": np.zeros([n])}, n, n) for n in rows]
    divided = _divide(batch, ways)
    assert [[task.rows for task in part] for part in divided] == parts
    assert [task for part in divided for task in part] == batch


def test_divide_balances_sequences_not_rows():
    # One row of 4 choices is as much work as four rows of one text.
    batch = [_Task({"choices": np.zeros([1, 4], object)}, 1, 4)] + [
        _Task({"choices": np.zeros([1, 1], object)}, 1, 1) for _ in range(4)]
    assert [len(part) for part in _divide(batch, 2)] == [1, 4]


def test_num_batch_threads_must_be_positive():
    with pytest.raises(ValueError, match="num_batch_threads must be at least 1, got 0"):
        BatchingQueue(RecordingModel(), max_batch_size=4, batch_timeout_micros=0,
                      num_batch_threads=0)
