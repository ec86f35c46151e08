"""Writing small pre-training TFRecords exactly as Google's `create_pretraining_data.py` does.

`write_instance_to_example_files` there builds each `tf.train.Example` from these features,
in this order, with `create_int_feature` (Int64List) and `create_float_feature` (FloatList):
input_ids, input_mask, segment_ids (padded with 0 to max_seq_length), masked_lm_positions,
masked_lm_ids (padded with 0), masked_lm_weights (1.0 real, 0.0 padding, to
max_predictions_per_seq), next_sentence_labels ([1] if B is a random sentence else [0]).

The token stream is learnable: each sentence counts up (`t, t+1, t+2...` modulo the vocab),
so a masked token follows from its neighbours, and a "random next" B starts anywhere, so the
next-sentence label follows from where B starts.

Example:
    >>> write_pretraining_records("/tmp/train.tfrecord", num_records=64, max_seq_length=16,
    ...                           max_predictions_per_seq=3, vocab_size=40)
"""

import collections

import numpy as np
import tensorflow as tf

CLS, SEP, MASK = 2, 3, 4
FIRST_WORD = 5


def _int_feature(values):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))


def _float_feature(values):
    return tf.train.Feature(float_list=tf.train.FloatList(value=list(values)))


def make_instance(rng, max_seq_length, max_predictions_per_seq, vocab_size):
    """One example's features (lists), as Google's writer produces them."""
    words = vocab_size - FIRST_WORD
    length_a = int(rng.integers(2, (max_seq_length - 3) // 2 + 1))
    length_b = int(rng.integers(1, max_seq_length - 3 - length_a + 1))
    start = int(rng.integers(words))
    a = [FIRST_WORD + (start + i) % words for i in range(length_a)]
    is_random_next = bool(rng.integers(2))
    b_start = int(rng.integers(words)) if is_random_next else start + length_a
    b = [FIRST_WORD + (b_start + i) % words for i in range(length_b)]
    tokens = [CLS] + a + [SEP] + b + [SEP]
    segment_ids = [0] * (length_a + 2) + [1] * (length_b + 1)
    candidates = [i for i, t in enumerate(tokens) if t not in (CLS, SEP)]
    num_predictions = min(max_predictions_per_seq, max(1, round(len(tokens) * 0.15)))
    positions = sorted(rng.choice(candidates, size=num_predictions, replace=False).tolist())
    labels = [tokens[p] for p in positions]
    for p in positions:
        tokens[p] = MASK
    input_mask = [1] * len(tokens)
    pad = max_seq_length - len(tokens)
    pad_predictions = max_predictions_per_seq - len(positions)
    return collections.OrderedDict(
        input_ids=tokens + [0] * pad,
        input_mask=input_mask + [0] * pad,
        segment_ids=segment_ids + [0] * pad,
        masked_lm_positions=positions + [0] * pad_predictions,
        masked_lm_ids=labels + [0] * pad_predictions,
        masked_lm_weights=[1.0] * len(positions) + [0.0] * pad_predictions,
        next_sentence_labels=[1 if is_random_next else 0])


def serialize_instance(instance):
    features = collections.OrderedDict()
    for name, values in instance.items():
        features[name] = (_float_feature(values) if name == "masked_lm_weights"
                          else _int_feature(values))
    return tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString()


def write_pretraining_records(path, num_records, max_seq_length=16, max_predictions_per_seq=3,
                              vocab_size=40, seed=0):
    """Writes `num_records` examples to `path`; returns them (lists of features)."""
    rng = np.random.default_rng(seed)
    instances = [make_instance(rng, max_seq_length, max_predictions_per_seq, vocab_size)
                 for _ in range(num_records)]
    with tf.io.TFRecordWriter(str(path)) as writer:
        for instance in instances:
            writer.write(serialize_instance(instance))
    return instances
