"""Overlapping windows over a SQuAD context: which window owns each token, and where the
"no answer" span sits.

`squad.squad_features` cuts a long context into windows `doc_stride` tokens apart; a token in
several windows may start a predicted answer only in the window that owns it
(`max_context_mask`). An unanswerable window is labelled, and its null score read
(`bert_tf.metrics.squad_postprocess`), at `[CLS]`, position `CLS_POSITION`.
"""

import numpy as np

# BertPacker puts [CLS] first.
CLS_POSITION = 0


def max_context_mask(span_starts, span_lengths):
    """For overlapping windows over one document's tokens, which tokens each window "owns".

    A token in several windows belongs to the one where it has the most context: the largest
    min(tokens to its left, tokens to its right) in the window, plus 0.01 * window length to
    break ties toward longer windows; the first window wins remaining ties. Only a window's own
    tokens may start an answer (BERT's `_check_is_max_context`).

    Args:
        span_starts: the first document token of each window.
        span_lengths: the number of document tokens in each window.

    Returns:
        One boolean array per window, `[span_length]`, True where the window owns the token.

    Example:
        >>> max_context_mask([0, 3], [5, 5])   # tokens 3 and 4 are in both windows
        [array([ True,  True,  True,  True, False]), array([False,  True,  True,  True,  True])]
    """
    if len(span_starts) != len(span_lengths):
        raise ValueError(f"Got {len(span_starts)} span starts and {len(span_lengths)} lengths")
    num_tokens = max((start + length for start, length in zip(span_starts, span_lengths)),
                     default=0)
    best_score = np.full(num_tokens, -np.inf)
    best_span = np.full(num_tokens, -1)
    for index, (start, length) in enumerate(zip(span_starts, span_lengths)):
        position = np.arange(start, start + length)
        score = np.minimum(position - start, start + length - 1 - position) + 0.01 * length
        better = score > best_score[position]
        best_score[position[better]] = score[better]
        best_span[position[better]] = index
    return [best_span[start:start + length] == index
            for index, (start, length) in enumerate(zip(span_starts, span_lengths))]
