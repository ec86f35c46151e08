import json

import pytest

from bert_tf.metrics.squad import (
    evaluate_squad_v1, evaluate_squad_v2, exact_match_score, f1_score, normalize_answer)
from tests.resources import shared_data_path


def squad(*questions):
    """A SQuAD JSON object with one paragraph holding `(id, [answer texts])` questions."""
    qas = [{"id": qid, "question": "?", "answers": [{"text": t, "answer_start": 0} for t in texts]}
           for qid, texts in questions]
    return {"version": "test", "data": [{"title": "t", "paragraphs": [{"context": "", "qas": qas}]}]}


def test_normalize_answer_follows_the_official_steps():
    assert normalize_answer("The  Quick, brown-fox!") == "quick brownfox"
    assert normalize_answer("An apple a day") == "apple day"
    assert normalize_answer("Theatre, Anna") == "theatre anna"      # articles are whole words
    assert normalize_answer("A.B.") == "ab"          # punctuation goes first, then "a" is no word
    assert normalize_answer("  the ") == ""


def test_token_f1_and_exact_match():
    # Normalized: "cat sat on mat" vs "cat on mat": P = 3/4, R = 1.
    assert f1_score("the cat sat on the mat", "a cat on a mat") == pytest.approx(6 / 7)
    assert f1_score("cat cat", "cat") == pytest.approx(2 * 0.5 * 1 / 1.5)    # counts, not sets
    assert f1_score("dog", "cat") == 0
    assert exact_match_score("The Denver Broncos.", "denver broncos") == 1
    assert exact_match_score("Broncos", "denver broncos") == 0


def test_v1_and_v2_differ_only_on_empty_answers():
    for prediction, truth in [("", ""), ("the", "a")]:
        assert f1_score(prediction, truth) == 0
        assert f1_score(prediction, truth, version_2_with_negative=True) == 1
    assert f1_score("x", "", version_2_with_negative=True) == 0


def test_evaluate_v1_takes_the_best_ground_truth_and_counts_missing_as_zero():
    dataset = squad(("q1", ["Denver Broncos", "the Denver Broncos"]),
                    ("q2", ["Denver Broncos"]), ("q3", ["Carolina"]))
    result = evaluate_squad_v1(dataset, {"q1": "Broncos", "q2": "The Denver Broncos."})
    # q1: EM 0, F1 2/3 (P 1, R 1/2); q2: EM 1, F1 1; q3: missing, 0.
    assert result == pytest.approx({"exact_match": 100 / 3, "f1": 100 * (2 / 3 + 1) / 3})
    assert evaluate_squad_v1(dataset["data"], {"q3": "carolina"})["exact_match"] == \
        pytest.approx(100 / 3)


V2 = squad(("a", ["Paris"]), ("b", ["in 1990", "1990"]), ("c", []), ("d", []))
V2_PREDICTIONS = {"a": "Paris", "b": "1990 or so", "c": "", "d": "London"}


def test_evaluate_v2_scores_has_answer_and_no_answer_questions():
    # a: 1/1; b: EM 0, F1 max(0.4 vs "in 1990", 0.5 vs "1990"); c: "" is right; d: wrong.
    assert evaluate_squad_v2(V2, V2_PREDICTIONS) == pytest.approx({
        "exact": 50.0, "f1": 62.5, "total": 4,
        "HasAns_exact": 50.0, "HasAns_f1": 75.0, "HasAns_total": 2,
        "NoAns_exact": 50.0, "NoAns_f1": 50.0, "NoAns_total": 2})


def test_evaluate_v2_with_no_answer_probabilities():
    na_probs = {"a": 0.1, "b": 0.6, "c": 0.9, "d": 0.7}
    result = evaluate_squad_v2(V2, V2_PREDICTIONS, na_probs, na_prob_thresh=0.65)
    # Above 0.65, c and d count as "no answer": right for both.
    assert result["exact"] == pytest.approx(75.0) and result["f1"] == pytest.approx(87.5)
    assert result["NoAns_exact"] == pytest.approx(100.0)
    # Sweep by na_prob from "all no answer" (2 right): a +1 (best 3 at 0.1), b +0 (exact) or
    # +0.5 (f1, best 3.5 at 0.6), d -1 (answered "London"), c 0.
    assert result["best_exact"] == pytest.approx(75.0) and result["best_exact_thresh"] == 0.1
    assert result["best_f1"] == pytest.approx(87.5) and result["best_f1_thresh"] == 0.6


def test_evaluate_v2_names_missing_predictions_and_probabilities():
    with pytest.raises(ValueError, match=r"prediction for every question; 1 missing, e.g. \['d'\]"):
        evaluate_squad_v2(V2, {"a": "", "b": "", "c": ""})
    with pytest.raises(ValueError, match=r"na_probs has no score for 1 questions, e.g. \['c'\]"):
        evaluate_squad_v2(V2, V2_PREDICTIONS, {"a": 0.0, "b": 0.0, "d": 0.0})


def test_real_squad_v1_dev_set():
    with open(shared_data_path("squad/dev-v1.1.json"), encoding="utf-8") as f:
        dataset = json.load(f)
    questions = [qa for article in dataset["data"] for paragraph in article["paragraphs"]
                 for qa in paragraph["qas"]]
    assert len(questions) == 10570
    first_answers = {qa["id"]: qa["answers"][0]["text"] for qa in questions}
    assert evaluate_squad_v1(dataset, first_answers) == {"exact_match": 100.0, "f1": 100.0}
    one = {questions[0]["id"]: questions[0]["answers"][-1]["text"]}
    assert evaluate_squad_v1(dataset, one) == pytest.approx(
        {"exact_match": 100 / 10570, "f1": 100 / 10570})
