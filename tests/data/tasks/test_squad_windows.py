"""bert_tf.data.tasks.squad_windows: which overlapping window owns each context token."""

import pytest

from bert_tf.data.tasks.squad_windows import max_context_mask


def test_max_context_mask_matches_berts_example():
    # BERT's comment: "the man went to the store and bought a gallon of milk" in windows
    # A = tokens 0-4, B = 3-7, C = 6-10. "bought" (7) has 4 left / 0 right tokens in B and
    # 1 left / 3 right in C, so C owns it; "to" (3) belongs to A (3 left, 1 right), "and" (6)
    # to B (3 left, 1 right).
    a, b, c = max_context_mask([0, 3, 6], [5, 5, 5])
    assert a.tolist() == [True, True, True, True, False]
    assert b.tolist() == [False, True, True, True, False]
    assert c.tolist() == [False, True, True, True, True]


def test_mismatched_starts_and_lengths_are_a_clear_error():
    with pytest.raises(ValueError, match="Got 2 span starts and 1 lengths"):
        max_context_mask([0, 3], [5])
