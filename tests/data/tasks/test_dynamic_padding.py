"""Dynamic padding and length bucketing: batches cut to their longest example, nothing lost."""

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.data.tasks.dynamic_padding import bucketed_batches, padded_batches, trim_padding

SEQ = 64


def _examples(lengths, choices=None):
    """(features, label, token_labels) with `input_mask` ones over `lengths`; word ids encode
    the example index so order and content can be checked after batching."""
    lengths = np.asarray(lengths)
    mask = (np.arange(SEQ) < lengths[:, None]).astype(np.int32)
    ids = mask * (np.arange(len(lengths))[:, None] + 1)
    if choices:
        mask = np.repeat(mask[:, None], choices, axis=1)
        ids = np.repeat(ids[:, None], choices, axis=1)
    features = {"input_word_ids": ids, "input_mask": mask, "input_type_ids": np.zeros_like(ids)}
    return tf.data.Dataset.from_tensor_slices(
        (features, np.arange(len(lengths)), np.where(mask == 1, 7, -1)))


def test_trim_padding_cuts_to_longest_rounded_up():
    batch = next(iter(_examples([3, 20, 5]).batch(3)))
    features, labels, token_labels = trim_padding(batch, SEQ, pad_to_multiple_of=16)
    assert features["input_word_ids"].shape == (3, 32)  # 20 rounded up to 32
    assert token_labels.shape == (3, 32)
    assert labels.shape == (3,)                          # not a sequence: untouched
    np.testing.assert_array_equal(features["input_mask"].numpy().sum(-1), [3, 20, 5])


def test_trim_padding_never_exceeds_max_seq_length():
    batch = next(iter(_examples([SEQ - 1, 2]).batch(2)))
    features, _, _ = trim_padding(batch, SEQ, pad_to_multiple_of=48)
    assert features["input_mask"].shape == (2, SEQ)


def test_trim_padding_of_multiple_choice_uses_longest_choice():
    batch = next(iter(_examples([3, 17], choices=4).batch(2)))
    features, _, _ = trim_padding(batch, SEQ, pad_to_multiple_of=8)
    assert features["input_word_ids"].shape == (2, 4, 24)


def test_padded_batches_keep_order_and_every_token():
    lengths = np.random.default_rng(0).integers(1, SEQ, size=50)
    batches = list(padded_batches(_examples(lengths), 8, SEQ))
    ids = np.concatenate([b[1].numpy() for b in batches])
    np.testing.assert_array_equal(ids, np.arange(50))
    kept = np.concatenate([b[0]["input_mask"].numpy().sum(-1) for b in batches])
    np.testing.assert_array_equal(kept, lengths)


def test_padded_batches_of_features_alone():
    features = _examples([4, 9]).map(lambda f, label, tokens: f)
    (batch,) = list(padded_batches(features, 2, SEQ, pad_to_multiple_of=4))
    assert isinstance(batch, dict) and batch["input_word_ids"].shape == (2, 12)


def test_bucketed_batches_group_similar_lengths_and_lose_nothing():
    lengths = np.random.default_rng(1).integers(1, SEQ, size=200)
    batches = list(bucketed_batches(_examples(lengths), 16, SEQ, pad_to_multiple_of=16))
    seen = np.concatenate([b[1].numpy() for b in batches])
    assert sorted(seen) == list(range(200))
    for features, example_ids, token_labels in batches:
        batch_lengths = lengths[example_ids.numpy()]
        padded = features["input_mask"].shape[1]
        # Every example of a batch comes from the same 16-wide bucket.
        assert len({(length - 1) // 16 for length in batch_lengths}) == 1
        assert padded == min(SEQ, -(-batch_lengths.max() // 16) * 16)
        np.testing.assert_array_equal(token_labels.numpy() == 7, features["input_mask"].numpy())
    full = [b for b in batches if b[1].shape[0] == 16]
    assert len(full) >= 200 // 16 - 4  # at most one partial batch per bucket


@pytest.mark.parametrize("drop_remainder", [True, False])
def test_bucketed_batches_drop_remainder(drop_remainder):
    batches = list(bucketed_batches(_examples([5] * 10), 4, SEQ, drop_remainder=drop_remainder))
    assert [b[1].shape[0] for b in batches] == ([4, 4] if drop_remainder else [4, 4, 2])
