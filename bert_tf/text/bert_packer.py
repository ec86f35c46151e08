"""`BertPacker`: tokenized segments to the encoder's `input_word_ids/input_mask/input_type_ids`."""

import numbers

import tensorflow as tf

TRUNCATION_STRATEGIES = ("round_robin", "waterfall")


class BertPacker:
    """Packs 1..N tokenized segments as `[CLS] A [SEP] B [SEP] ...`, padded to `seq_length`.

    Segments longer than the `seq_length - (N + 1)` word pieces left after the special tokens are
    truncated from their ends: `round_robin` (the default, as in TF Hub's `bert_pack_inputs`)
    gives the budget one piece at a time to each segment in turn, so a long segment cannot push
    out a short one (for two segments this is the original `_truncate_seq_pair`); `waterfall`
    fills the first segment first, then the next. `input_type_ids` is 0 for `[CLS]`, the first
    segment and its `[SEP]`, 1 for the second segment and its `[SEP]`, and so on.

    Args:
        seq_length: length of the packed inputs.
        start_id, end_id, pad_id: ids of `[CLS]`, `[SEP]` and `[PAD]`.
        truncation: "round_robin" or "waterfall".

    Example:
        >>> packer = BertPacker(seq_length=8, start_id=101, end_id=102)
        >>> packer([tf.ragged.constant([[[7592], [2088]]]), tf.ragged.constant([[[2748]]])])
        {'input_word_ids': <... [[101, 7592, 2088, 102, 2748, 102, 0, 0]]>,
         'input_mask': <... [[1, 1, 1, 1, 1, 1, 0, 0]]>,
         'input_type_ids': <... [[0, 0, 0, 0, 1, 1, 0, 0]]>}
    """

    def __init__(self, seq_length, start_id, end_id, pad_id=0, truncation="round_robin"):
        if truncation not in TRUNCATION_STRATEGIES:
            raise ValueError(f"truncation must be one of {TRUNCATION_STRATEGIES}, "
                             f"got {truncation!r}.")
        # Refused, not rounded: int() made 2.5 a 2 and None a TypeError.
        if (not isinstance(seq_length, numbers.Integral) or isinstance(seq_length, bool)
                or seq_length < 2):
            raise ValueError(f"seq_length must be an integer of at least 2 ([CLS] and [SEP]), "
                             f"got {seq_length!r}.")
        self.seq_length = int(seq_length)
        self.start_id, self.end_id, self.pad_id = int(start_id), int(end_id), int(pad_id)
        self.truncation = truncation

    @classmethod
    def for_tokenizer(cls, tokenizer, seq_length, truncation="round_robin"):
        """A packer with the `[CLS]`, `[SEP]` and `[PAD]` ids of `tokenizer` (a
        `BertTokenizer`): what every raw-text pipeline pairs with its tokenizer.

        Example:
            >>> tokenizer = BertTokenizer("vocab.txt", lower_case=True)
            >>> packer = BertPacker.for_tokenizer(tokenizer, seq_length=128)
        """
        return cls(seq_length, start_id=tokenizer.token_id("[CLS]"),
                   end_id=tokenizer.token_id("[SEP]"), pad_id=tokenizer.token_id("[PAD]"),
                   truncation=truncation)

    # Plain TensorFlow ops without tensor-dependent Python control flow: AutoGraph (tf.function,
    # tf.data) has nothing to convert, and converting this code would cost seconds per trace.
    @tf.autograph.experimental.do_not_convert
    def __call__(self, segments, seq_length=None):
        """`segments`: a list of int `RaggedTensor`s `[batch, words, pieces]` or
        `[batch, pieces]` (one per segment, same batch). Returns the dict of int32
        `[batch, seq_length]` tensors. `seq_length` overrides the constructor's and may be a
        scalar tensor (TF Hub's `bert_pack_inputs` takes it at call time)."""
        if isinstance(segments, (tf.Tensor, tf.RaggedTensor)):
            segments = [segments]
        segments = [self._as_pieces(segment, index) for index, segment in enumerate(segments)]
        batch_sizes = [segment.shape[0] for segment in segments]
        if not segments or len(set(batch_sizes) - {None}) > 1:
            raise ValueError(f"BertPacker takes one or more segments of the same batch size, "
                             f"got batch sizes {batch_sizes}.")
        seq_length = self.seq_length if seq_length is None else seq_length
        num_special = len(segments) + 1
        message = (f"seq_length cannot hold {len(segments)} segment(s): [CLS] and one [SEP] "
                   f"per segment need {num_special}")
        if isinstance(seq_length, int):
            if seq_length < num_special:
                raise ValueError(f"{message}, got seq_length {seq_length}.")
            budget = seq_length - num_special
        else:
            seq_length = tf.cast(seq_length, tf.int32)
            with tf.control_dependencies([tf.debugging.assert_greater_equal(
                    seq_length, num_special, message=message)]):
                budget = seq_length - num_special
        # Packing works on the flat piece ids and the row lengths of the segments; the only
        # [batch, seq_length] ops make the three outputs. (tf.text's trimmer, combine_segments
        # and pad_model_inputs concatenate ragged tensors and pad twice: on short texts that
        # cost about three times as much as the whole WordPiece tokenization.)
        lengths = [segment.row_lengths() for segment in segments]
        kept = (_round_robin_lengths if self.truncation == "round_robin"
                else _waterfall_lengths)(lengths, tf.cast(budget, tf.int64))
        # All ids in one vector: the segments' pieces, then [CLS] and [SEP].
        values = tf.concat([segment.values for segment in segments]
                           + [[self.start_id, self.end_id]], axis=0)
        value_offsets = tf.cumsum([tf.size(segment.values, tf.int64) for segment in segments],
                                  exclusive=True)
        cls_index = tf.size(values, tf.int64) - 2
        # A packed row is a run of chunks: [CLS], the kept pieces of segment 0, [SEP], those of
        # segment 1, [SEP], ... Each chunk is a range of `values`; ragged.range lists the
        # indices of all chunks of all rows in order in one op.
        one = tf.ones_like(kept[0])
        chunk_starts, chunk_lengths = [one * cls_index], [one]
        for segment, value_offset, length in zip(segments, tf.unstack(value_offsets), kept):
            chunk_starts += [segment.row_starts() + value_offset, one * (cls_index + 1)]
            chunk_lengths += [length, one]
        chunk_starts = tf.reshape(tf.stack(chunk_starts, axis=1), [-1])
        chunk_lengths = tf.stack(chunk_lengths, axis=1)
        packed_indices = tf.ragged.range(chunk_starts, chunk_starts
                                         + tf.reshape(chunk_lengths, [-1])).values
        packed_lengths = tf.reduce_sum(chunk_lengths, axis=1)
        # A static seq_length gives outputs of static shape [None, seq_length].
        shape = ([None, seq_length] if isinstance(seq_length, int)
                 else tf.stack([-1, tf.cast(seq_length, tf.int64)]))
        word_ids = tf.RaggedTensor.from_row_lengths(
            tf.gather(values, packed_indices), packed_lengths, validate=False).to_tensor(
                self.pad_id, shape=shape)
        mask = tf.sequence_mask(packed_lengths, seq_length, dtype=tf.int32)
        # input_type_ids is i from the start of segment i to the end of the packed row.
        type_ids = tf.zeros_like(mask)
        segment_start = 1 + kept[0] + 1
        for length in kept[1:]:
            type_ids += mask - tf.sequence_mask(segment_start, seq_length, dtype=tf.int32)
            segment_start += length + 1
        return {"input_word_ids": word_ids, "input_mask": mask, "input_type_ids": type_ids}

    @staticmethod
    def _as_pieces(segment, index):
        if not isinstance(segment, tf.RaggedTensor):
            segment = tf.RaggedTensor.from_tensor(tf.convert_to_tensor(segment))
        if segment.shape.rank == 3:
            segment = segment.merge_dims(1, 2)
        if segment.shape.rank != 2 or not segment.dtype.is_integer:
            raise ValueError(f"Segment {index} must be int ids of shape [batch, words, pieces] "
                             f"or [batch, pieces], got {segment.dtype.name} {segment.shape}.")
        return tf.cast(segment, tf.int32).with_row_splits_dtype(tf.int64)


def _round_robin_lengths(lengths, budget):
    """How many pieces of each segment round-robin truncation keeps: the budget is handed out
    one piece per segment in turn (segment order), skipping segments that ran out.

    In closed form: every segment keeps min(length, level), where `level` is the largest number
    of rounds that fit the budget completely, and the budget left after those rounds gives one
    more piece to each of the first segments (in order) that still have pieces.
    """
    if len(lengths) == 1:
        return [tf.minimum(lengths[0], budget)]
    lengths_by_row = tf.stack(lengths, axis=1)                 # [batch, segments]
    num_segments = len(lengths)
    # Pieces used if every segment keeps min(length, level), at level = each segment's length,
    # in increasing order of length: non-decreasing along the row.
    ascending = tf.sort(lengths_by_row, axis=1)
    shorter_total = tf.cumsum(ascending, axis=1, exclusive=True)
    longer_count = tf.range(num_segments, 0, -1, dtype=tf.int64)
    used = shorter_total + longer_count * ascending
    # The first of them that exceeds the budget says which segments are shorter than the level.
    num_fitting = tf.reduce_sum(tf.cast(used <= budget, tf.int64), axis=1)
    at = tf.minimum(num_fitting, num_segments - 1)
    level = tf.where(
        num_fitting == num_segments, ascending[:, -1],
        (budget - tf.gather(shorter_total, at, batch_dims=1))
        // tf.gather(longer_count, at))[:, tf.newaxis]
    kept = tf.minimum(lengths_by_row, level)
    left_over = budget - tf.reduce_sum(kept, axis=1, keepdims=True)
    has_more = lengths_by_row > level
    turn = tf.cumsum(tf.cast(has_more, tf.int64), axis=1, exclusive=True)
    kept += tf.cast(has_more & (turn < left_over), tf.int64)
    return tf.unstack(kept, num=num_segments, axis=1)


def _waterfall_lengths(lengths, budget):
    """How many pieces of each segment waterfall truncation keeps: the first segment takes what
    it needs of the budget, the next one takes what is left, and so on."""
    kept, left = [], budget
    for length in lengths:
        kept.append(tf.minimum(length, left))
        left -= kept[-1]
    return kept
