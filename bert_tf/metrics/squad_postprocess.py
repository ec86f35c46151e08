"""SQuAD span decoding: from a span labeler's start/end logits back to answer text.

A long context is split into several overlapping windows ("features", `doc_stride` apart);
each feature is one `[CLS] question [SEP] context window [SEP]` sequence. For one question,
`decode_answer` takes all its features and does what Google's `run_squad.py` does:

* in each feature, pair the `n_best_size` highest start logits with the `n_best_size` highest
  end logits, keeping spans that lie inside the context, start in a token whose window gives it
  the most context (`bert_tf.data.tasks.squad_windows.max_context_mask`), end no earlier than
  they start and are at most `max_answer_length` tokens long;
* rank all spans by start + end logit, cut the answer text out of the context with the tokens'
  character offsets, drop repeated texts, and keep the best `n_best_size` with their softmax
  probabilities;
* for SQuAD v2.0, score "no answer" as the span at `[CLS]` (position 0), taking the feature
  with the lowest null score, and answer "" when null score - best span score exceeds
  `null_score_diff_threshold`.

Cutting text with character offsets returns the context's own characters, where Google's code
re-aligns whitespace-split words (its `get_final_text`); the answers are the same except that
this never loses accents or casing to the tokenizer's normalization.

Example:
    >>> answer = decode_answer(context, [{"start_logits": s, "end_logits": e,
    ...                                   "token_offsets": offsets}])
    >>> answer["text"], answer["nbest"][0]["probability"]
"""

import numpy as np

from bert_tf.data.tasks.squad_windows import CLS_POSITION
from bert_tf.metrics.softmax import softmax


def _top_indices(logits, n):
    # Stable, so equal logits keep position order (as BERT's sorted() does).
    return np.argsort(-logits, kind="stable")[:n]


def best_spans(start_logits, end_logits, token_offsets, token_is_max_context=None,
               n_best_size=20, max_answer_length=30):
    """The valid candidate spans of one feature, best first.

    Args:
        start_logits, end_logits: `[seq]` logits of the feature.
        token_offsets: `[seq, 2]` (start, end) character offsets of each token in the
            context, end exclusive; negative for tokens not from the context (`[CLS]`, the
            question, `[SEP]`, padding).
        token_is_max_context: optional `[seq]` booleans (`squad_windows.max_context_mask`); a
            span may only start where it is True. Default: everywhere (a single window).
        n_best_size: how many start and end positions to pair.
        max_answer_length: the longest span, in tokens.

    Returns:
        A list of `(start_token, end_token, start_logit, end_logit)`, by decreasing
        start + end logit.
    """
    start_logits = np.asarray(start_logits, np.float64)
    end_logits = np.asarray(end_logits, np.float64)
    token_offsets = np.asarray(token_offsets)
    seq = len(start_logits)
    if end_logits.shape != (seq,) or token_offsets.shape != (seq, 2):
        raise ValueError(f"start_logits {start_logits.shape}, end_logits {end_logits.shape} and "
                         f"token_offsets {token_offsets.shape} must be [seq], [seq], [seq, 2]")
    in_context = token_offsets[:, 0] >= 0
    can_start = in_context if token_is_max_context is None else (
        in_context & np.asarray(token_is_max_context, bool))
    spans = [(start, end, start_logits[start], end_logits[end])
             for start in _top_indices(start_logits, n_best_size)
             for end in _top_indices(end_logits, n_best_size)
             if can_start[start] and in_context[end] and start <= end < start + max_answer_length]
    # Python's sort is stable: equal scores keep the order of the search, as in BERT.
    return sorted(spans, key=lambda span: span[2] + span[3], reverse=True)


def decode_answer(context, features, n_best_size=20, max_answer_length=30,
                  version_2_with_negative=False, null_score_diff_threshold=0.0):
    """The answer to one question from the logits of all its features.

    Args:
        context: the context the offsets point into: `str` with character offsets, or the
            UTF-8 `bytes` with byte offsets (what tf.text's `tokenize_with_offsets` returns).
        features: a sequence of mappings, one per window, with `start_logits`, `end_logits`,
            `token_offsets` and optionally `token_is_max_context` (see `best_spans`).
        n_best_size: the number of start/end positions searched, and of answers kept.
        max_answer_length: the longest answer, in tokens.
        version_2_with_negative: SQuAD v2.0: "no answer" (scored at `[CLS]`) is a candidate.
        null_score_diff_threshold: v2.0: answer "" when null score - best span score exceeds
            this (tuned on dev data; 0 by default, as in BERT).

    Returns:
        A dict with `text` (the answer; "" for no answer), `nbest` (a list of dicts with
        `text`, `probability`, `start_logit`, `end_logit`, best first; v2.0 always includes
        ""), and for v2.0 `null_score_diff` (null score - best span score, +inf when no span is
        valid; the official v2.0 evaluation takes it as the no-answer probability `na_probs`).
    """
    if not features:
        raise ValueError("decode_answer needs at least one feature")
    candidates = []
    for feature in features:
        offsets = np.asarray(feature["token_offsets"])
        for start, end, start_logit, end_logit in best_spans(
                feature["start_logits"], feature["end_logits"], offsets,
                feature.get("token_is_max_context"), n_best_size, max_answer_length):
            candidates.append((start_logit + end_logit, start_logit, end_logit,
                               offsets[start, 0], offsets[end, 1]))
    if version_2_with_negative:
        null_start, null_end = min(
            ((float(f["start_logits"][CLS_POSITION]), float(f["end_logits"][CLS_POSITION]))
             for f in features), key=sum)
        candidates.append((null_start + null_end, null_start, null_end, None, None))
    candidates.sort(key=lambda candidate: candidate[0], reverse=True)

    nbest, seen = [], set()
    for _, start_logit, end_logit, char_start, char_end in candidates:
        if len(nbest) >= n_best_size:
            break
        text = "" if char_start is None else context[char_start:char_end]
        if isinstance(text, bytes):
            text = text.decode("utf-8", errors="replace")
        text = text.strip()
        if text in seen:
            continue
        seen.add(text)
        nbest.append({"text": text, "start_logit": float(start_logit),
                      "end_logit": float(end_logit)})
    if version_2_with_negative and "" not in seen:
        # "No answer" ranked below the n best: still list it, as BERT does.
        nbest.append({"text": "", "start_logit": null_start, "end_logit": null_end})
    probabilities = softmax([e["start_logit"] + e["end_logit"] for e in nbest]) if nbest else []
    for entry, probability in zip(nbest, probabilities):
        entry["probability"] = float(probability)

    best_span = next((entry for entry in nbest if entry["text"]), None)
    if not version_2_with_negative:
        return {"text": best_span["text"] if best_span else "", "nbest": nbest}
    null_score_diff = (null_start + null_end - best_span["start_logit"] - best_span["end_logit"]
                       if best_span else float("inf"))
    text = "" if null_score_diff > null_score_diff_threshold else best_span["text"]
    return {"text": text, "nbest": nbest, "null_score_diff": null_score_diff}
