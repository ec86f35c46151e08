"""bert_tf.data.tasks.squad_windows: where the windows over a context start, which overlapping
window owns each context token, which window settings leave no room for the context, and which
answer rules are refused."""

import pytest
import tensorflow as tf

from bert_tf.data.tasks.squad_windows import (check_answer_rules, check_windows, context_windows,
                                              max_context_mask)


def owners(starts, lengths):
    return max_context_mask(tf.ragged.constant(starts, tf.int64),
                            tf.ragged.constant(lengths, tf.int64)).to_list()


def test_max_context_mask_matches_berts_example():
    # BERT's comment: "the man went to the store and bought a gallon of milk" in windows
    # A = tokens 0-4, B = 3-7, C = 6-10. "bought" (7) has 4 left / 0 right tokens in B and
    # 1 left / 3 right in C, so C owns it; "to" (3) belongs to A (3 left, 1 right), "and" (6)
    # to B (3 left, 1 right).
    [[a, b, c]] = owners([[0, 3, 6]], [[5, 5, 5]])
    assert a == [True, True, True, True, False]
    assert b == [False, True, True, True, False]
    assert c == [False, True, True, True, True]


def test_ties_go_to_the_longer_window_then_to_the_first():
    # Token 3 has 1 token of context on its short side in both windows of length 5: the first
    # wins. In the second document, token 3 has none on its short side in either window: the
    # longer (4 > 2) wins.
    assert owners([[0, 2], [0, 2]], [[5, 5], [4, 2]]) == [
        [[True, True, True, True, False], [False, False, True, True, True]],
        [[True, True, True, True], [False, False]]]


def test_documents_of_a_batch_are_windowed_and_owned_apart():
    starts, lengths = context_windows([12, 0, 3, 9], window_length=[5, 5, 5, 4], doc_stride=3,
                                      max_windows=3)
    # 12 tokens: windows 3 apart until one reaches the end (cut at 3 windows); no token: one
    # empty window; 3 tokens: one short window; windows of 4 tokens step 3 (< their length).
    assert starts.to_list() == [[0, 3, 6], [0], [0], [0, 3, 6]]
    assert lengths.to_list() == [[5, 5, 5], [0], [3], [4, 4, 3]]
    owned = max_context_mask(starts, lengths).to_list()
    assert owned[1:3] == [[[]], [[True, True, True]]]
    # Every token of a document is owned by exactly one window.
    assert sum(sum(window) for window in owned[3]) == 9
    # Window length above doc_stride: the windows overlap; at or below it, they tile.
    starts, lengths = context_windows([10], window_length=2, doc_stride=3)
    assert (starts.to_list(), lengths.to_list()) == ([[0, 2, 4, 6, 8]], [[2] * 5])


@pytest.mark.parametrize("settings, message", [
    ((64, 128, 64), r"seq_length \(64\) must exceed max_query_length \(64\) \+ 3 special tokens"),
    ((384, 0, 64), "doc_stride must be at least 1, got 0"),
    ((384, 128, 0), "max_query_length must be at least 1, got 0"),
    ((384, 128, 64, 0), "max_windows must be at least 1, got 0"),
])
def test_settings_without_room_for_the_context_are_refused(settings, message):
    with pytest.raises(ValueError, match=message):
        check_windows(*settings)
    check_windows(68, 1, 64, 1)      # one context token per window


def test_a_tools_flags_are_named_as_flags():
    with pytest.raises(ValueError, match=r"^--max_seq_length \(64\) must exceed "
                                         r"--max_query_length \(64\) \+ 3 special tokens"):
        check_windows(64, 128, 64, tool_flags={"seq_length": "max_seq_length"})
    with pytest.raises(ValueError, match=r"^--doc_stride must be at least 1, got 0\.$"):
        check_windows(384, 0, 64, tool_flags={})


@pytest.mark.parametrize("rules, message", [
    ((0,), r"^max_answer_length must be at least 1, got 0\.$"),
    ((30, float("nan")), r"^null_score_diff_threshold must be a number, got nan\.$"),
    ((0, None, {}), r"^--max_answer_length must be at least 1, got 0\.$"),   # a tool's flags
])
def test_an_answer_length_below_1_and_a_nan_threshold_are_refused(rules, message):
    with pytest.raises(ValueError, match=message):
        check_answer_rules(*rules)
    check_answer_rules(1, -2.5)      # one-token answers; v2.0, a negative threshold
    check_answer_rules(1, None)      # v1.1
