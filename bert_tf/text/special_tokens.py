"""Special tokens written in text (`[CLS]`, `[SEP]`, `[MASK]`, ...) cut out, as Hugging Face does.

Hugging Face's `BertWordPieceTokenizer` finds its special tokens in the raw text, exactly as
written (case-sensitive, before any clean-up or lower-casing, also inside words: `a[CLS]b`),
and tokenizes the text between them on its own. `cut_at_special_tokens` does that cut with
core TensorFlow string ops; the caller tokenizes the segments and `SpecialTokenCut.join` puts
the special tokens back between them.

Example:
    >>> cut = cut_at_special_tokens(tf.constant(["a[CLS]b", "x"]), {"[CLS]": 101})
    >>> cut.segments
    <tf.Tensor: ... numpy=array([b'a', b'b', b'x'], dtype=object)>
    >>> ids = tokenizer.tokenize_to_pieces(cut.segments)      # [segments, pieces]
    >>> cut.join([ids])[0]
    <tf.RaggedTensor [[1037, 101, 1038], [1060]]>
"""

import tensorflow as tf

# Every special token of BERT's vocabularies starts with "[" and has no other "[": the text is
# split at each "[" (a byte that is never part of a multi-byte UTF-8 character) and a piece
# that starts with a token's rest ("CLS]") follows a special token.
_OPENING = "["


def cut_at_special_tokens(texts, special_ids):
    """Cuts each of `texts [batch]` around the special tokens written in it.

    `special_ids` maps each special token (`"[CLS]"`, ...) to its id. A text with m special
    tokens in it has m + 1 segments (possibly empty). Returns a `SpecialTokenCut`.
    """
    for token in special_ids:
        if not token.startswith(_OPENING) or _OPENING in token[1:]:
            raise ValueError(f"Special tokens must start with {_OPENING!r} and contain no other "
                             f"{_OPENING!r}; got {token!r}.")
    pieces = tf.strings.split(texts, sep=_OPENING)   # every text has at least one piece
    values = pieces.values
    lengths = tf.strings.length(values, unit="BYTE")
    piece_rows = pieces.value_rowids()
    first = tf.range(tf.size(values, tf.int64)) == tf.gather(pieces.row_splits, piece_rows)
    # Byte offset of each piece in its text: the pieces before it, each followed by one "[".
    global_start = tf.cumsum(tf.cast(lengths, tf.int64) + 1, exclusive=True)
    piece_start = global_start - tf.gather(tf.gather(global_start, pieces.row_starts()),
                                           piece_rows)

    rest_length = tf.zeros_like(lengths)       # bytes of the token after its "[", 0: no token
    token_id = tf.zeros_like(lengths)
    for token, index in special_ids.items():
        rest = token[len(_OPENING):]
        found = ~first & tf.equal(tf.strings.substr(values, 0, len(rest.encode())), rest)
        rest_length = tf.where(found, len(rest.encode()), rest_length)
        token_id = tf.where(found, index, token_id)
    matched = rest_length > 0

    # A segment starts at each text's first piece and after each special token.
    starts_segment = first | matched
    after_token = tf.strings.substr(values, rest_length, lengths - rest_length)
    content = tf.where(starts_segment, after_token, tf.strings.join([_OPENING, after_token]))
    segment_of_piece = tf.cumsum(tf.cast(starts_segment, tf.int64)) - 1
    num_segments = tf.reduce_sum(tf.cast(starts_segment, tf.int64))
    segments = tf.strings.unsorted_segment_join(content, segment_of_piece, num_segments)
    end_of_token = piece_start + tf.cast(rest_length, tf.int64)

    # The joined output of a text is segment, token, segment, ..., segment: each piece that
    # starts a segment gives its token (if any) and then its segment.
    units = tf.cast(starts_segment, tf.int64) + tf.cast(matched, tf.int64)
    unit_position = tf.cumsum(units, exclusive=True)
    segment_position = tf.boolean_mask(unit_position + tf.cast(matched, tf.int64),
                                       starts_segment)
    token_position = tf.boolean_mask(unit_position, matched)
    return SpecialTokenCut(
        segments=segments,
        segment_starts=tf.boolean_mask(end_of_token, starts_segment),
        token_ids=tf.boolean_mask(token_id, matched),
        token_starts=tf.boolean_mask(piece_start - len(_OPENING), matched),
        token_ends=tf.boolean_mask(end_of_token, matched),
        order=tf.math.invert_permutation(tf.concat([segment_position, token_position], 0)),
        text_splits=tf.gather(tf.concat([[0], tf.cumsum(units)], 0), pieces.row_splits))


class SpecialTokenCut:
    """Texts cut around their special tokens (see `cut_at_special_tokens`).

    Attributes:
        segments: string `[segments]`, the text between special tokens, texts in order.
        segment_starts: int64 `[segments]`, the byte offset of each segment in its text.
        token_ids, token_starts, token_ends: `[tokens]`, each special token's id (int32) and
            byte span (int64) in its text, texts in order.
    """

    def __init__(self, segments, segment_starts, token_ids, token_starts, token_ends, order,
                 text_splits):
        self.segments = segments
        self.segment_starts = segment_starts
        self.token_ids = token_ids
        self.token_starts = token_starts
        self.token_ends = token_ends
        self._order = order                 # segments then tokens -> their order in the texts
        self._text_splits = text_splits     # row splits of the texts over that order

    def join(self, segment_results):
        """The tokenization of the texts from that of their segments.

        `segment_results` is `(ids,)` or `(ids, starts, ends)` of the segments, each
        `[segments, words, pieces]` or `[segments, pieces]`, offsets counted in the segment.
        Returns the same for the texts: each special token is a word of one piece, with the
        byte span it has in its text.
        """
        joined = []
        for index, result in enumerate(segment_results):
            tokens = tf.cast((self.token_ids, self.token_starts, self.token_ends)[index],
                             result.dtype)
            if index > 0:  # offsets: from the segment's start to the text's start
                pieces_per_segment = result.merge_dims(1, -1).row_lengths()
                result = result.with_flat_values(
                    result.flat_values + tf.repeat(self.segment_starts, pieces_per_segment))
            one_each = tf.ones_like(self.token_ids, tf.int64)
            tokens = tf.RaggedTensor.from_nested_row_lengths(
                tokens, [one_each] * result.ragged_rank, validate=False)
            units = tf.gather(tf.concat([result, tokens], axis=0), self._order)
            joined.append(tf.RaggedTensor.from_row_splits(units, self._text_splits,
                                                          validate=False).merge_dims(1, 2))
        return tuple(joined)
