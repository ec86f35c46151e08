"""Task exports run their model on at most `max_tokens_per_call` packed positions at a time:
`run_in_slices` cuts a batch's rows into slices of `max(1, max_tokens // length)` rows, one
after the other, and concatenates the outputs in order; an export with slices of one or two
sequences answers as the export that runs a request at once (every output, every task, SQuAD
windows and multiple-choice examples split across slices)."""

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.export import export_task_model, write_version
from bert_tf.export.model_slices import run_in_slices
from tests.export.task_examples import EXPORT_OPTIONS, FEEDS, SEQ_LENGTH

ATOL = 1e-5


def slice_sizes(rows, length, max_tokens):
    """Per row, the rows of the slice it ran in, and the row's own value through `run`."""
    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32)])
    def sliced(ids):
        def run(part):
            size = tf.shape(part["ids"])[0]
            return tf.fill([size], size), part["ids"][:, 0] * 10
        return run_in_slices(run, {"ids": ids}, max_tokens,
                             [tf.TensorSpec([None], tf.int32)] * 2)

    ids = np.arange(rows * length, dtype=np.int32).reshape([rows, length])
    sizes, values = sliced(tf.constant(ids))
    np.testing.assert_array_equal(values, ids[:, 0] * 10)    # every row, in order
    return sizes.numpy().tolist()


@pytest.mark.parametrize("rows, length, max_tokens, sizes", [
    (10, 4, 12, [3] * 9 + [1]),      # 3 rows of 4 per call, the last slice the remainder
    (9, 4, 12, [3] * 9),
    (3, 4, 12, [3] * 3),             # a request that fits runs at once
    (4, 16, 12, [1] * 4),            # rows longer than max_tokens: one at a time
    (0, 8, 12, []),
])
def test_rows_run_in_slices_of_max_tokens(rows, length, max_tokens, sizes):
    assert slice_sizes(rows, length, max_tokens) == sizes


def test_slices_run_one_after_the_other():
    function = tf.function(lambda ids: run_in_slices(
        lambda part: (part["ids"] + 1,), {"ids": ids}, 4, [tf.TensorSpec([None, None],
                                                                          tf.int32)]))
    graph = function.get_concrete_function(tf.TensorSpec([None, None], tf.int32)).graph
    library = {f.signature.name: f for f in graph.as_graph_def().library.function}
    loops = [node for f in library.values() for node in f.node_def
             if node.op in ("While", "StatelessWhile")]
    assert loops and all(node.attr["parallel_iterations"].i == 1 for node in loops)


def repeated(feeds, times):
    return {name: value * times for name, value in feeds.items()}


# Long contexts make 3 windows each (EXPORT_OPTIONS' max_windows), so slices of one or two
# windows split a question's windows.
LONG_CONTEXTS = {"question": ["what world?", "a film?", "hello"],
                 "context": ["Hello unaffable world, the world. " * 3,
                             "a good film! a bad movie " * 4, "what is the film"]}


@pytest.mark.parametrize("task", sorted(FEEDS))
@pytest.mark.parametrize("max_tokens_per_call", [1, 2 * SEQ_LENGTH])
def test_an_export_in_slices_answers_as_at_once(tmp_path, task_exports, vocab_file, task,
                                                 max_tokens_per_call):
    _, at_once, model = task_exports[task]
    path = write_version(str(tmp_path / task), lambda d: export_task_model(
        d, task, model, vocab_file, do_lower_case=True, seq_length=SEQ_LENGTH,
        max_tokens_per_call=max_tokens_per_call, **EXPORT_OPTIONS[task]))
    loaded = tf.saved_model.load(path)
    assert loaded.max_tokens_per_call.numpy() == max_tokens_per_call
    sliced = loaded.signatures["serving_default"]
    feeds = [repeated(FEEDS[task], 3)] + ([LONG_CONTEXTS] if task == "squad" else [])
    for feed in feeds:
        inputs = {name: tf.constant(value) for name, value in feed.items()}
        expected = at_once.signatures["serving_default"](**inputs)
        outputs = sliced(**inputs)
        assert sorted(outputs) == sorted(expected)
        for name, value in expected.items():
            if value.dtype.is_floating:
                np.testing.assert_allclose(outputs[name], value, atol=ATOL, err_msg=name)
            else:
                np.testing.assert_array_equal(outputs[name], value, err_msg=name)
    if task == "squad":   # the long contexts did take several windows
        assert expected["window"].numpy().max() >= 1


def test_max_tokens_per_call_below_1_is_refused(task_exports, vocab_file, tmp_path):
    model = task_exports["classifier"][2]
    with pytest.raises(ValueError, match=r"^max_tokens_per_call must be at least 1, got 0\.$"):
        export_task_model(str(tmp_path / "1"), "classifier", model, vocab_file, True,
                          seq_length=SEQ_LENGTH, max_tokens_per_call=0,
                          **EXPORT_OPTIONS["classifier"])
