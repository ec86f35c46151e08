"""`BertPacker`: tokenized segments to the encoder's `input_word_ids/input_mask/input_type_ids`."""

import tensorflow as tf
import tensorflow_text as tf_text

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
        self.seq_length = int(seq_length)
        self.start_id, self.end_id, self.pad_id = int(start_id), int(end_id), int(pad_id)
        self.truncation = truncation

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
        trimmer_class = (tf_text.RoundRobinTrimmer if self.truncation == "round_robin"
                         else tf_text.WaterfallTrimmer)
        trimmed = trimmer_class(budget).trim(segments)
        word_ids, type_ids = tf_text.combine_segments(
            trimmed, start_of_sequence_id=self.start_id, end_of_segment_id=self.end_id)
        word_ids, mask = tf_text.pad_model_inputs(word_ids, seq_length, self.pad_id)
        type_ids, _ = tf_text.pad_model_inputs(type_ids, seq_length, 0)
        return {"input_word_ids": tf.cast(word_ids, tf.int32),
                "input_mask": tf.cast(mask, tf.int32),
                "input_type_ids": tf.cast(type_ids, tf.int32)}

    @staticmethod
    def _as_pieces(segment, index):
        if not isinstance(segment, tf.RaggedTensor):
            segment = tf.RaggedTensor.from_tensor(tf.convert_to_tensor(segment))
        if segment.shape.rank == 3:
            segment = segment.merge_dims(1, 2)
        if segment.shape.rank != 2 or not segment.dtype.is_integer:
            raise ValueError(f"Segment {index} must be int ids of shape [batch, words, pieces] "
                             f"or [batch, pieces], got {segment.dtype.name} {segment.shape}.")
        return tf.cast(segment, tf.int32)
