import random

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text as tf_text

from bert_tf.text.bert_packer import BertPacker
from bert_tf.text.bert_tokenizer import BertTokenizer

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


def test_for_tokenizer_takes_the_special_ids_from_the_vocabulary(tmp_path):
    # Not BERT's usual ids: [UNK] 0, [PAD] 1, [SEP] 2, [CLS] 3.
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[UNK]\n[PAD]\n[SEP]\n[CLS]\nhello\nworld\n")
    tokenizer = BertTokenizer(str(vocab), lower_case=True)
    packer = BertPacker.for_tokenizer(tokenizer, seq_length=6, truncation="waterfall")
    assert (packer.start_id, packer.end_id, packer.pad_id, packer.truncation) == (
        3, 2, 1, "waterfall")
    packed = packer([tokenizer.tokenize(tf.constant(["Hello world"]))])
    assert packed["input_word_ids"].numpy().tolist() == [[3, 4, 5, 2, 1, 1]]


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
    for bad in (2.5, None, 1, True):
        with pytest.raises(ValueError, match=f"seq_length must be an integer of at least 2 "
                                             f"\\(\\[CLS\\] and \\[SEP\\]\\), got {bad!r}"):
            BertPacker(bad, CLS, SEP)
    with pytest.raises(ValueError, match=r"same batch size, got batch sizes \[2, 1\]"):
        BertPacker(8, CLS, SEP)([tf.ragged.constant([[1], [2]]), tf.ragged.constant([[3]])])
    with pytest.raises(ValueError, match=r"one or more segments"):
        BertPacker(8, CLS, SEP)([])


def tf_text_packed(segments, seq_length, truncation):
    """The same packing composed of tf.text's trimmers, combine_segments and pad_model_inputs."""
    trimmer = (tf_text.RoundRobinTrimmer if truncation == "round_robin"
               else tf_text.WaterfallTrimmer)(seq_length - len(segments) - 1)
    word_ids, type_ids = tf_text.combine_segments(trimmer.trim(segments), CLS, SEP)
    word_ids, mask = tf_text.pad_model_inputs(word_ids, seq_length)
    type_ids, _ = tf_text.pad_model_inputs(type_ids, seq_length)
    return {"input_word_ids": word_ids, "input_mask": mask, "input_type_ids": type_ids}


@pytest.mark.parametrize("truncation", ["round_robin", "waterfall"])
def test_random_segments_pack_like_tf_text(truncation):
    # Lengths around the budget (and empty rows) for 1 to 4 segments: the closed-form trimming
    # and the flat packing agree with tf.text's iterative ops on every row.
    rng = np.random.default_rng(7)
    for num_segments in (1, 2, 3, 4):
        segments = []
        for index in range(num_segments):
            lengths = rng.integers(0, 50, 300) * (rng.random(300) < 0.9)
            segments.append(tf.RaggedTensor.from_row_lengths(
                tf.constant(rng.integers(1000 * (index + 1), 1000 * (index + 2), lengths.sum()),
                            tf.int32), lengths))
        for seq_length in (num_segments + 1, num_segments + 2, 16, 37, 64, 200):
            packed = BertPacker(seq_length, CLS, SEP, truncation=truncation)(segments)
            expected = tf_text_packed(segments, seq_length, truncation)
            for key, value in expected.items():
                np.testing.assert_array_equal(
                    packed[key], value, f"{key}, {num_segments} segments, seq {seq_length}")
                assert packed[key].dtype == tf.int32 and packed[key].shape[1] == seq_length
