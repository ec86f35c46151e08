import numpy as np
import pytest

from bert_tf.metrics.squad_postprocess import best_spans, decode_answer

# [CLS] question [SEP] Hello big world [SEP] [PAD]: only positions 3-5 are context.
CONTEXT = "Hello big world"
OFFSETS = [[-1, -1], [-1, -1], [-1, -1], [0, 5], [6, 9], [10, 15], [-1, -1], [-1, -1]]
START = [5.0, 9.0, 0.0, 1.0, 3.0, 2.0, 0.0, -1e9]
END = [5.0, 0.0, 0.0, 0.0, 4.0, 2.5, 8.0, -1e9]
FEATURE = {"start_logits": START, "end_logits": END, "token_offsets": OFFSETS}
# All valid (start, end) pairs and their scores, by hand: the question and [SEP] positions have
# the highest logits but are not context.
RANKED = [((4, 4), 7.0, "big"), ((4, 5), 5.5, "big world"), ((3, 4), 5.0, "Hello big"),
          ((5, 5), 4.5, "world"), ((3, 5), 3.5, "Hello big world"), ((3, 3), 1.0, "Hello")]


def test_best_spans_stay_in_the_context_and_rank_by_score():
    spans = best_spans(START, END, OFFSETS)
    assert [(s, e) for s, e, _, _ in spans] == [span for span, _, _ in RANKED]
    assert [s + e for _, _, s, e in spans] == [score for _, score, _ in RANKED]


def test_best_spans_limits():
    one_token = best_spans(START, END, OFFSETS, max_answer_length=1)
    assert [(s, e) for s, e, _, _ in one_token] == [(4, 4), (5, 5), (3, 3)]
    # The 2 best starts (1, 0) and ends (6, 0) are all outside the context.
    assert best_spans(START, END, OFFSETS, n_best_size=2) == []
    # 4 best starts: 1, 0, 4, 5; ends: 6, 0, 4, 5.
    four = best_spans(START, END, OFFSETS, n_best_size=4)
    assert [(s, e) for s, e, _, _ in four] == [(4, 4), (4, 5), (5, 5)]
    not_max_context = [True, True, True, True, False, True, True, True]
    spans = best_spans(START, END, OFFSETS, token_is_max_context=not_max_context)
    assert [(s, e) for s, e, _, _ in spans] == [(3, 4), (5, 5), (3, 5), (3, 3)]


def test_decode_v1_answer_and_nbest_probabilities():
    answer = decode_answer(CONTEXT, [FEATURE])
    assert answer["text"] == "big" and "null_score_diff" not in answer
    assert [entry["text"] for entry in answer["nbest"]] == [text for _, _, text in RANKED]
    scores = np.array([score for _, score, _ in RANKED])
    expected = np.exp(scores - scores.max()) / np.exp(scores - scores.max()).sum()
    np.testing.assert_allclose([e["probability"] for e in answer["nbest"]], expected, rtol=1e-12)
    assert answer["nbest"][0]["start_logit"] == 3.0 and answer["nbest"][0]["end_logit"] == 4.0
    assert len(decode_answer(CONTEXT, [FEATURE], n_best_size=4)["nbest"]) == 3


def test_decode_v2_no_answer_at_cls_and_threshold():
    # Null score 5 + 5 = 10, best span 7: the difference 3 exceeds the default threshold 0.
    answer = decode_answer(CONTEXT, [FEATURE], version_2_with_negative=True)
    assert answer["text"] == "" and answer["null_score_diff"] == pytest.approx(3.0)
    assert answer["nbest"][0]["text"] == "" and answer["nbest"][1]["text"] == "big"
    assert decode_answer(CONTEXT, [FEATURE], version_2_with_negative=True,
                         null_score_diff_threshold=3.5)["text"] == "big"
    # A null ranked outside the n best is still listed, last.
    low_null = dict(FEATURE, start_logits=[-5.0] + START[1:])
    answer = decode_answer(CONTEXT, [low_null], n_best_size=4, version_2_with_negative=True)
    assert [e["text"] for e in answer["nbest"]] == ["big", "big world", "Hello big", "world", ""]
    assert answer["null_score_diff"] == pytest.approx(-5.0 + 5.0 - 7.0)


def test_several_windows_share_one_nbest():
    # A second window over "big world", where "big" scores lower and the null score is lower.
    second = {"start_logits": [4.0, 0.0, 0.0, 2.0, 6.0, 0.0],
              "end_logits": [4.0, 0.0, 0.0, 1.0, 3.0, 0.0],
              "token_offsets": [[-1, -1], [-1, -1], [-1, -1], [6, 9], [10, 15], [-1, -1]]}
    answer = decode_answer(CONTEXT, [FEATURE, second], version_2_with_negative=True)
    texts = [e["text"] for e in answer["nbest"]]
    assert texts[:3] == ["world", "", "big"]       # world: 6 + 3 = 9 in the second window
    assert len(texts) == len(set(texts))           # "big" from the second window is dropped
    # The null score is the lowest over the windows: 4 + 4 = 8; best span 9.
    assert answer["null_score_diff"] == pytest.approx(-1.0) and answer["text"] == "world"


def test_byte_offsets_into_utf8_context():
    context = "Zürich ist groß".encode("utf-8")
    feature = {"start_logits": [0.0, 1.0, 0.0, 5.0], "end_logits": [0.0, 1.0, 0.0, 5.0],
               "token_offsets": [[-1, -1], [0, 7], [8, 11], [12, 17]]}
    assert decode_answer(context, [feature])["text"] == "groß"
    assert decode_answer(context, [feature], max_answer_length=1)["nbest"][1]["text"] == "Zürich"


def test_no_valid_span():
    feature = dict(FEATURE, token_offsets=[[-1, -1]] * 8)
    assert decode_answer(CONTEXT, [feature]) == {"text": "", "nbest": []}
    v2 = decode_answer(CONTEXT, [feature], version_2_with_negative=True)
    assert v2["text"] == "" and v2["null_score_diff"] == float("inf")
    assert [e["text"] for e in v2["nbest"]] == [""] and v2["nbest"][0]["probability"] == 1.0


def test_bad_shapes_are_clear_errors():
    with pytest.raises(ValueError, match=r"token_offsets \(8,\) must be \[seq\], \[seq\], \[seq, 2\]"):
        best_spans(START, END, [0] * 8)
    with pytest.raises(ValueError, match="at least one feature"):
        decode_answer(CONTEXT, [])
