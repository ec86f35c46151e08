import random

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.text.bert_packer import BertPacker

CLS, SEP = 101, 102


def truncate_seq_pair(tokens_a, tokens_b, max_length):
    """The original BERT's `_truncate_seq_pair` (run_classifier.py), the reference for pairs."""
    while len(tokens_a) + len(tokens_b) > max_length:
        if len(tokens_a) > len(tokens_b):
            tokens_a.pop()
        else:
            tokens_b.pop()


def test_pairs_truncate_like_the_original_bert():
    rng = random.Random(0)
    lengths = [(rng.randrange(0, 40), rng.randrange(0, 40)) for _ in range(100)]
    a = tf.ragged.constant([list(range(1000, 1000 + la)) for la, _ in lengths], tf.int32)
    b = tf.ragged.constant([list(range(2000, 2000 + lb)) for _, lb in lengths], tf.int32)
    for seq_length in (3, 4, 17, 40, 90):
        expected = {"input_word_ids": [], "input_mask": [], "input_type_ids": []}
        for la, lb in lengths:
            tokens_a, tokens_b = list(range(1000, 1000 + la)), list(range(2000, 2000 + lb))
            truncate_seq_pair(tokens_a, tokens_b, seq_length - 3)
            ids = [CLS] + tokens_a + [SEP] + tokens_b + [SEP]
            padding = [0] * (seq_length - len(ids))
            expected["input_word_ids"].append(ids + padding)
            expected["input_mask"].append([1] * len(ids) + padding)
            expected["input_type_ids"].append(
                [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1) + padding)
        packed = BertPacker(seq_length, CLS, SEP)([a, b])
        for key, value in expected.items():
            np.testing.assert_array_equal(packed[key], value, f"{key}, seq_length {seq_length}")


def test_three_segments_round_robin_and_waterfall():
    segments = [tf.ragged.constant([[[1, 2], [3]], [[4]]]),        # [batch, words, pieces]
                tf.ragged.constant([[5, 6, 7, 8], [9]]),           # [batch, pieces]
                tf.ragged.constant([[10, 11], []])]
    round_robin = BertPacker(9, CLS, SEP)(segments)
    assert round_robin["input_word_ids"].numpy().tolist() == [
        [CLS, 1, 2, SEP, 5, 6, SEP, 10, SEP], [CLS, 4, SEP, 9, SEP, SEP, 0, 0, 0]]
    assert round_robin["input_type_ids"].numpy().tolist() == [
        [0, 0, 0, 0, 1, 1, 1, 2, 2], [0, 0, 0, 1, 1, 2, 0, 0, 0]]
    waterfall = BertPacker(9, CLS, SEP, truncation="waterfall")(segments)
    assert waterfall["input_word_ids"].numpy().tolist() == [
        [CLS, 1, 2, 3, SEP, 5, 6, SEP, SEP], [CLS, 4, SEP, 9, SEP, SEP, 0, 0, 0]]


def test_seq_length_may_be_a_tensor_and_any_length():
    tokens = tf.ragged.constant([[7] * 600])
    pack = tf.function(lambda t, n: BertPacker(128, CLS, SEP)([t], seq_length=n))
    for seq_length in (2, 3, 128, 512):
        packed = pack(tokens, tf.constant(seq_length))
        assert packed["input_word_ids"].numpy().tolist() == [
            [CLS] + [7] * (seq_length - 2) + [SEP]]
        assert packed["input_word_ids"].dtype == tf.int32


def test_bad_configurations_are_named():
    with pytest.raises(ValueError, match="truncation must be one of"):
        BertPacker(8, CLS, SEP, truncation="longest_first")
    with pytest.raises(ValueError, match=r"cannot hold 2 segment\(s\).*need 3, got seq_length 2"):
        BertPacker(2, CLS, SEP)([tf.ragged.constant([[1]]), tf.ragged.constant([[2]])])
    with pytest.raises(ValueError, match="Segment 1 must be int ids"):
        BertPacker(8, CLS, SEP)([tf.ragged.constant([[1]]), tf.constant([["a"]])])
    with pytest.raises(tf.errors.InvalidArgumentError, match="cannot hold 1 segment"):
        BertPacker(8, CLS, SEP)([tf.ragged.constant([[1]])], seq_length=tf.constant(1))
