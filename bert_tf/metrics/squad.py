"""SQuAD v1.1 and v2.0 scores, computed exactly as the official evaluation scripts do.

Answers are compared after `normalize_answer` (lower-case, drop punctuation, the articles
a/an/the and extra whitespace); each question scores the best match over its gold answers.
v1.1 reports `exact_match` and `f1` over all questions (a missing prediction scores 0). v2.0
adds unanswerable questions, whose only right answer is the empty string, reports `exact`,
`f1` and `total` overall and for the `HasAns_` / `NoAns_` subsets, and, given no-answer
probabilities, the best thresholds for them (`best_exact`, `best_f1`, ...).

Example:
    >>> dataset = json.load(open("dev-v1.1.json"))
    >>> evaluate_squad_v1(dataset, {"56be4db0acb8001400a502ec": "Denver Broncos", ...})
    {'exact_match': 81.2, 'f1': 88.5}
"""

import collections
import logging
import re
import string

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text):
    """Lower-cases and removes punctuation, articles and extra whitespace, in the official order."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match_score(prediction, ground_truth):
    """1 if the normalized strings are equal, else 0."""
    return int(normalize_answer(prediction) == normalize_answer(ground_truth))


def f1_score(prediction, ground_truth, version_2_with_negative=False):
    """Token-level F1 of the normalized strings.

    The scripts differ only when a side normalizes to nothing: v1.1 scores that 0; v2.0 treats
    an empty string as "no answer" and scores 1 when both are empty.
    """
    prediction_tokens = normalize_answer(prediction).split()
    truth_tokens = normalize_answer(ground_truth).split()
    if version_2_with_negative and (not prediction_tokens or not truth_tokens):
        return int(prediction_tokens == truth_tokens)
    num_same = sum((collections.Counter(prediction_tokens)
                    & collections.Counter(truth_tokens)).values())
    if num_same == 0:
        return 0
    precision = num_same / len(prediction_tokens)
    recall = num_same / len(truth_tokens)
    return 2 * precision * recall / (precision + recall)


def _questions(dataset):
    """The question dicts of a SQuAD file's JSON (the whole object or its `data` list)."""
    articles = dataset["data"] if isinstance(dataset, dict) else dataset
    for article in articles:
        for paragraph in article["paragraphs"]:
            yield from paragraph["qas"]


def evaluate_squad_v1(dataset, predictions):
    """The official SQuAD v1.1 `evaluate-v1.1.py` on `predictions` ({question id: text})."""
    exact_match = f1 = total = 0
    unanswered = []
    for qa in _questions(dataset):
        total += 1
        if qa["id"] not in predictions:
            unanswered.append(qa["id"])
            continue
        truths = [answer["text"] for answer in qa["answers"]]
        prediction = predictions[qa["id"]]
        exact_match += max(exact_match_score(prediction, truth) for truth in truths)
        f1 += max(f1_score(prediction, truth) for truth in truths)
    if unanswered:
        logging.warning("%d unanswered questions (e.g. %s) will receive score 0.",
                        len(unanswered), unanswered[:3])
    return {"exact_match": 100.0 * exact_match / total, "f1": 100.0 * f1 / total}


def evaluate_squad_v2(dataset, predictions, na_probs=None, na_prob_thresh=1.0):
    """The official SQuAD v2.0 `evaluate-v2.0.py`.

    Args:
        dataset: the JSON of a SQuAD v2.0 file (or its `data` list).
        predictions: {question id: answer text}, "" for "no answer". Every question needs one.
        na_probs: optional {question id: no-answer score}, e.g. the span decoder's
            `null_score_diff`. A question whose score exceeds `na_prob_thresh` counts as
            answered "no answer". With it, the result also has the best thresholds.
        na_prob_thresh: see `na_probs`.

    Returns:
        A dict with `exact`, `f1`, `total`, the same with `HasAns_` / `NoAns_` prefixes (for
        subsets that occur), and with `na_probs`: `best_exact`, `best_exact_thresh`,
        `best_f1`, `best_f1_thresh`. Scores are percentages.
    """
    questions = list(_questions(dataset))
    has_answer = {qa["id"]: bool(qa["answers"]) for qa in questions}
    # The official script would die with a KeyError on these; say what is wrong instead.
    missing = [qid for qid in has_answer if qid not in predictions]
    if missing:
        raise ValueError(f"SQuAD v2.0 needs a prediction for every question; {len(missing)} "
                         f"missing, e.g. {missing[:3]}")
    threshold_search = na_probs is not None
    if na_probs is None:
        na_probs = {qid: 0.0 for qid in predictions}
    missing = [qid for qid in has_answer if qid not in na_probs]
    if missing:
        raise ValueError(f"na_probs has no score for {len(missing)} questions, e.g. {missing[:3]}")

    exact_raw, f1_raw = {}, {}
    for qa in questions:
        truths = [answer["text"] for answer in qa["answers"] if normalize_answer(answer["text"])]
        # An unanswerable question (or one whose answers normalize to nothing) has one right
        # answer: the empty string.
        truths = truths or [""]
        prediction = predictions[qa["id"]]
        exact_raw[qa["id"]] = max(exact_match_score(prediction, truth) for truth in truths)
        f1_raw[qa["id"]] = max(f1_score(prediction, truth, version_2_with_negative=True)
                               for truth in truths)

    def thresholded(raw):
        return {qid: float(not has_answer[qid]) if na_probs[qid] > na_prob_thresh else score
                for qid, score in raw.items()}

    exact, f1 = thresholded(exact_raw), thresholded(f1_raw)
    result = _averages(exact, f1, list(exact))
    for prefix, wanted in (("HasAns", True), ("NoAns", False)):
        subset = [qid for qid, answered in has_answer.items() if answered == wanted]
        if subset:
            result.update({f"{prefix}_{key}": value
                           for key, value in _averages(exact, f1, subset).items()})
    if threshold_search:
        for name, raw in (("exact", exact_raw), ("f1", f1_raw)):
            score, threshold = _best_threshold(predictions, raw, na_probs, has_answer)
            result[f"best_{name}"] = score
            result[f"best_{name}_thresh"] = threshold
    return result


def _averages(exact, f1, qids):
    return {"exact": 100.0 * sum(exact[qid] for qid in qids) / len(qids),
            "f1": 100.0 * sum(f1[qid] for qid in qids) / len(qids),
            "total": len(qids)}


def _best_threshold(predictions, scores, na_probs, has_answer):
    """The no-answer threshold that maximizes the total score, and that score.

    Sweeps questions from the least to the most likely unanswerable: below the threshold a
    question keeps its answer (gaining its score if answerable, losing 1 if it is unanswerable
    and the answer is not empty); above it, it is answered "no answer" (right exactly for the
    unanswerable ones, which is where the sweep starts: everything answered "no answer").
    """
    score = best_score = sum(1 for answered in has_answer.values() if not answered)
    best_threshold = 0.0
    for qid in sorted(na_probs, key=lambda qid: na_probs[qid]):
        if qid not in scores:
            continue
        if has_answer[qid]:
            score += scores[qid]
        elif predictions[qid]:
            score -= 1
        if score > best_score:
            best_score, best_threshold = score, na_probs[qid]
    return 100.0 * best_score / len(scores), best_threshold
