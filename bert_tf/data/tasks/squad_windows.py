"""Overlapping windows over a SQuAD context: where they start, which window owns each token, and
where the "no answer" span sits; and the checks of their settings and of the answer rules
(`check_windows`, `check_answer_rules`) that training, the squad export and the tools share.

A long context is read in windows `doc_stride` tokens apart (`context_windows`); a token in
several windows may start a predicted answer only in the window that owns it
(`max_context_mask`). Both are TensorFlow ops on whole batches, so that `squad.squad_features`
(training and evaluation) and the squad SavedModel (`bert_tf.export.text_inputs`, in its graph)
window a context alike. An unanswerable window is labelled, and its null score read
(`bert_tf.metrics.squad_postprocess`), at `[CLS]`, position `CLS_POSITION`.

Example:
    >>> starts, lengths = context_windows([12], window_length=[5], doc_stride=3)
    >>> starts.to_list(), lengths.to_list()
    ([[0, 3, 6, 9]], [[5, 5, 5, 3]])
    >>> max_context_mask(starts, lengths).to_list()[0][1]     # tokens 3..7
    [False, True, True, True, False]
"""

import math

# BertPacker puts [CLS] first.
CLS_POSITION = 0
# Google's run_squad.py defaults, for run_squad and the squad export alike.
DEFAULT_DOC_STRIDE = 128
DEFAULT_MAX_QUERY_LENGTH = 64
# The squad export reads at most this many windows per context: every context of SQuAD v1.1 dev
# fits (MiniLM's word pieces: at most 5 windows at seq_length 384, 9 at 128, 12 at 128 with
# doc_stride 64), while a request costs at most 16 sequences through the encoder per question.
DEFAULT_MAX_WINDOWS = 16
# [CLS] question [SEP] context window [SEP].
SPECIAL_TOKENS = 3


def _named(argument, tool_flags):
    """How a check names `argument`: itself, or with `tool_flags` (a mapping of the arguments a
    tool's flags name otherwise; `{}` when each flag is named as its argument) as its flag."""
    if tool_flags is None:
        return argument
    return "--" + tool_flags.get(argument, argument)


def check_windows(seq_length, doc_stride, max_query_length, max_windows=None, tool_flags=None):
    """Raises a one-line ValueError unless windows of `seq_length` tokens `doc_stride` apart,
    next to a question of up to `max_query_length` tokens, hold at least one context token
    (and `max_windows`, when given, is at least 1). `tool_flags` names them as a tool's flags
    (`_named`): run_squad's `{"seq_length": "max_seq_length"}`, export_savedmodel's `{}`.

    Example:
        >>> check_windows(seq_length=64, doc_stride=128, max_query_length=64)
        ValueError: seq_length (64) must exceed max_query_length (64) + 3 special tokens, to
        leave room for the context.
    """
    for argument, value in (("doc_stride", doc_stride), ("max_query_length", max_query_length),
                            ("max_windows", max_windows)):
        if value is not None and value < 1:
            raise ValueError(f"{_named(argument, tool_flags)} must be at least 1, got {value}.")
    if seq_length < max_query_length + SPECIAL_TOKENS + 1:
        raise ValueError(f"{_named('seq_length', tool_flags)} ({seq_length}) must exceed "
                         f"{_named('max_query_length', tool_flags)} ({max_query_length}) + "
                         f"{SPECIAL_TOKENS} special tokens, to leave room for the context.")


def check_answer_rules(max_answer_length, null_score_diff_threshold=None, tool_flags=None):
    """Raises a one-line ValueError unless answers may be `max_answer_length` >= 1 tokens long
    and `null_score_diff_threshold` (SQuAD v2.0; None for v1.1) is a number: NaN compares false
    with every score, so the scores would not decide between a span and no answer. `tool_flags`
    names them as a tool's flags (`_named`; `{}` for --max_answer_length), whose values they are.

    Example:
        >>> check_answer_rules(max_answer_length=30, null_score_diff_threshold=float("nan"))
        ValueError: null_score_diff_threshold must be a number, got nan.
    """
    if max_answer_length < 1:
        raise ValueError(f"{_named('max_answer_length', tool_flags)} must be at least 1, got "
                         f"{max_answer_length}.")
    if null_score_diff_threshold is not None and math.isnan(null_score_diff_threshold):
        raise ValueError(f"{_named('null_score_diff_threshold', tool_flags)} must be a number, "
                         f"got nan.")


def context_windows(num_tokens, window_length, doc_stride, max_windows=None):
    """The windows over each context of a batch: `(starts, lengths)`, int64 `RaggedTensor`s
    `[contexts, (windows)]` (first token and number of tokens of each window).

    As Google's run_squad.py: windows start `min(window_length, doc_stride)` tokens apart, from
    0, until one reaches the end of the context (that last one may be shorter); an empty
    context gets one empty window. With `max_windows`, a context keeps only its first
    `max_windows` windows (the tokens after them are not read).

    Args:
        num_tokens: int `[contexts]`, the tokens of each context.
        window_length: int `[contexts]` (or a scalar), the most context tokens a window holds.
        doc_stride: the distance between window starts when windows overlap.
        max_windows: optional int, the most windows per context.
    """
    # Imported here: the tools read this module's defaults when they define their flags, before
    # TensorFlow loads (bert_tf.cli.app sets its logging first).
    import tensorflow as tf

    num_tokens = tf.cast(num_tokens, tf.int64)
    window_length = tf.broadcast_to(tf.cast(window_length, tf.int64), tf.shape(num_tokens))
    stride = tf.minimum(window_length, doc_stride)
    count = 1 + (tf.maximum(num_tokens - window_length, 0) + stride - 1) // stride
    if max_windows is not None:
        count = tf.minimum(count, max_windows)
    index = tf.ragged.range(count)
    context = index.value_rowids()
    starts = index.values * tf.gather(stride, context)
    lengths = tf.minimum(tf.gather(window_length, context), tf.gather(num_tokens, context) - starts)
    return index.with_values(starts), index.with_values(lengths)


def max_context_mask(window_starts, window_lengths):
    """For overlapping windows over documents, which tokens each window "owns".

    A token in several windows belongs to the one where it has the most context: the largest
    min(tokens to its left, tokens to its right) in the window, plus 0.01 * window length to
    break ties toward longer windows; the first window wins remaining ties. Only a window's own
    tokens may start an answer (BERT's `_check_is_max_context`).

    Args:
        window_starts: int `RaggedTensor [documents, (windows)]`, the first document token of
            each window (from `context_windows`).
        window_lengths: the same shape, the number of document tokens of each window.

    Returns:
        A bool `RaggedTensor [documents, (windows), (window length)]`, True where the window
        owns the token.

    Example:
        >>> max_context_mask(tf.ragged.constant([[0, 3]]), tf.ragged.constant([[5, 5]]))
        <tf.RaggedTensor [[[True, True, True, True, False], [False, True, True, True, True]]]>
    """
    import tensorflow as tf  # see context_windows

    starts = tf.cast(window_starts.values, tf.int64)
    lengths = tf.cast(window_lengths.values, tf.int64)
    offsets = tf.ragged.range(lengths)                    # [windows, (length)]
    window = offsets.value_rowids()
    offset, length = offsets.values, tf.gather(lengths, window)
    # BERT's score times 100, in integers: with floats, min + 0.01 * length rounds, so that a
    # tie between windows of lengths 100 apart could go either way.
    score = 100 * tf.minimum(offset, length - 1 - offset) + length
    # One segment per (document, token).
    token = tf.gather(starts, window) + offset
    document = tf.gather(window_starts.value_rowids(), window)
    keys, segment = tf.unique(document * (tf.reduce_max(token) + 1) + token, out_idx=tf.int64)
    num_segments = tf.size(keys, out_type=tf.int64)
    best = tf.gather(tf.math.unsorted_segment_max(score, segment, num_segments), segment)
    first_best = tf.math.unsorted_segment_min(
        tf.where(score == best, window, tf.int64.max), segment, num_segments)
    return window_starts.with_values(
        offsets.with_values(window == tf.gather(first_best, segment)))
