"""Masked-LM masking, offline (Google's algorithm) and in-graph: the same rules, checked
exactly on hand-made sequences and statistically over many draws."""

import collections
import functools
import os
import random
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.data.pretraining.masking import MaskedLmVocab, create_masked_lm_predictions, mask_batch
from bert_tf.layers.onednn import onednn_enabled
from tests.data.pretraining.toy_corpus import (ABLE, AFF, CLS, FIRST_NUMBERED, MASK, PAD, SEP,
                                               UN, VOCAB, word_ids)
from tests.resources import REPO_ROOT

VOCAB_INFO = MaskedLmVocab(VOCAB)


def sequence(text_a, text_b=None):
    ids = [CLS] + word_ids(text_a) + [SEP]
    if text_b:
        ids += word_ids(text_b) + [SEP]
    return ids


def words_of(length):
    return " ".join(f"w{i}" for i in range(length))


def offline(ids, seed, prob=0.15, max_predictions=20, whole_word=False):
    return create_masked_lm_predictions(ids, VOCAB_INFO, prob, max_predictions, whole_word,
                                        random.Random(seed))


def dense(rows, seq_length):
    ids = np.zeros([len(rows), seq_length], np.int32)
    mask = np.zeros([len(rows), seq_length], np.int32)
    for r, row in enumerate(rows):
        ids[r, :len(row)] = row
        mask[r, :len(row)] = 1
    return tf.constant(ids), tf.constant(mask)


@functools.lru_cache(maxsize=None)
def compiled_mask_batch(prob, max_predictions, whole_word):
    # As in tf.data: traced once, then called (eager tf.scan would loop in Python).
    return tf.function(lambda ids, mask, seed: mask_batch(ids, mask, VOCAB_INFO, prob,
                                                          max_predictions, whole_word, seed))


def in_graph(rows, seed, seq_length=32, prob=0.15, max_predictions=20, whole_word=False):
    ids, mask = dense(rows, seq_length)
    out = compiled_mask_batch(prob, max_predictions, whole_word)(
        ids, mask, tf.constant(seed, tf.int64))
    return {k: v.numpy() for k, v in out.items()}, ids.numpy()


def in_graph_rows(rows, seed, **kwargs):
    """Per row: (output ids, positions, labels) without padding, like the offline function."""
    out, _ = in_graph(rows, seed, **kwargs)
    result = []
    for r, row in enumerate(rows):
        n = int(out["masked_lm_weights"][r].sum())
        result.append((out["input_word_ids"][r, :len(row)].tolist(),
                       out["masked_lm_positions"][r, :n].tolist(),
                       out["masked_lm_ids"][r, :n].tolist()))
    return result


def test_vocab_facts_and_missing_special_token():
    assert (VOCAB_INFO.mask_id, VOCAB_INFO.cls_id, VOCAB_INFO.sep_id, VOCAB_INFO.pad_id) == (
        MASK, CLS, SEP, PAD)
    assert VOCAB_INFO.is_continuation[AFF] and not VOCAB_INFO.is_continuation[UN]
    with pytest.raises(ValueError, match=r"lacks \['\[MASK\]'\]"):
        MaskedLmVocab([t for t in VOCAB if t != "[MASK]"])


# round(length * masked_lm_prob) with [CLS] and two [SEP] counted, at least 1, at most 20:
# 0.6, 1.5, 2.55, 5.25, 2.5 and 3.5 (halves round to even, as Python's round), 30 -> 20.
@pytest.mark.parametrize("length,prob,expected", [(4, 0.15, 1), (10, 0.15, 2), (17, 0.15, 3),
                                                  (35, 0.15, 5), (10, 0.25, 2), (14, 0.25, 4),
                                                  (200, 0.15, 20)])
def test_number_of_predictions_is_the_originals(length, prob, expected):
    words = list(range(FIRST_NUMBERED, FIRST_NUMBERED + length - 3))
    ids = [CLS] + words[:len(words) // 2] + [SEP] + words[len(words) // 2:] + [SEP]
    for seed in range(3):
        _, positions, _ = offline(ids, seed, prob=prob)
        assert len(positions) == expected
    for _, positions, _ in in_graph_rows([ids] * 3, [0, 1], seq_length=256, prob=prob):
        assert len(positions) == expected


@pytest.mark.parametrize("implementation", ["offline", "in_graph"])
def test_predictions_are_sorted_labelled_and_never_special(implementation):
    rows = [sequence(words_of(n % 20 + 1), words_of(n % 7 + 1)) for n in range(60)]
    if implementation == "offline":
        results = [offline(row, seed) for seed, row in enumerate(rows)]
    else:
        results = in_graph_rows(rows, [3, 4])
    for row, (output, positions, labels) in zip(rows, results):
        assert positions == sorted(set(positions))
        assert labels == [row[p] for p in positions]
        assert not {row[p] for p in positions} & {CLS, SEP}
        unchanged = [i for i in range(len(row)) if i not in positions]
        assert [output[i] for i in unchanged] == [row[i] for i in unchanged]


def test_all_pieces_predicted_at_probability_one():
    ids = sequence("the cat sat", "on the mat")
    _, positions, _ = offline(ids, 0, prob=1.0)
    assert positions == [1, 2, 3, 5, 6, 7]
    (_, graph_positions, _), = in_graph_rows([ids], [0, 0], prob=1.0)
    assert graph_positions == positions


@pytest.mark.parametrize("implementation", ["offline", "in_graph"])
def test_whole_word_fills_the_budget_or_is_skipped(implementation):
    # 20 pieces at 15 % -> 3 predictions: exactly the three pieces of "unaffable", or, when the
    # word does not fit (2 predictions at 10 %), never a part of it.
    word = [UN, AFF, ABLE]
    ids = [CLS] + word + [SEP] + word_ids(words_of(14)) + [SEP]
    long_word = [CLS] + word + [SEP] + [UN, AFF, ABLE] + [SEP]

    def run(row, prob):
        # 200 independent draws.
        if implementation == "offline":
            return [offline(row, seed, prob=prob, whole_word=True) for seed in range(200)]
        return in_graph_rows([row] * 200, [9, 1], prob=prob, whole_word=True)

    words_chosen = 0
    for _, positions, _ in run(ids, 0.15):
        assert len(positions) == 3
        in_word = [p for p in positions if 1 <= p <= 3]
        assert in_word in ([], [1, 2, 3])
        words_chosen += bool(in_word)
    # The word is taken when it comes first of the 15 words in the random order.
    assert 200 / 15 / 3 < words_chosen < 3 * 200 / 15
    # 9 pieces at 0.25 -> round(2.25) = 2: neither 3-piece word fits.
    for output, positions, _ in run(long_word, 0.25):
        assert positions == [] and output == long_word


@pytest.mark.parametrize("implementation", ["offline", "in_graph"])
def test_a_word_that_does_not_fit_leaves_room_for_a_shorter_one(implementation):
    # One prediction (7 pieces at 15 %): "unaffable" never fits, so it is always "cat".
    ids = [CLS, UN, AFF, ABLE, *word_ids("cat"), SEP, SEP]
    for seed in range(20):
        if implementation == "offline":
            _, positions, _ = offline(ids, seed, whole_word=True)
        else:
            (_, positions, _), = in_graph_rows([ids], [seed, 2], whole_word=True)
        assert positions == [4]


def test_without_whole_word_mask_pieces_are_masked_alone():
    ids = [CLS] + [UN, AFF, ABLE] * 6 + [SEP]            # 20 pieces -> 3 predictions
    split_words = 0
    for seed in range(50):
        _, positions, _ = offline(ids, seed)
        words = {(p - 1) // 3 for p in positions}
        split_words += any(len([p for p in positions if (p - 1) // 3 == w]) < 3 for w in words)
    assert split_words >= 45


def count_outcomes(originals, outputs):
    outcomes = collections.Counter()
    for original, output in zip(originals, outputs):
        if output == MASK:
            outcomes["mask"] += 1
        elif output == original:
            outcomes["kept"] += 1
        else:
            outcomes["random"] += 1
            outcomes[("random_id", output)] += 1
    return outcomes


def check_80_10_10(outcomes, total):
    # An unchanged piece is "kept" (10 %) or a random draw that hit it (10 % / |vocab|).
    assert total > 20000
    assert abs(outcomes["mask"] / total - 0.8) < 0.015
    assert abs(outcomes["kept"] / total - (0.1 + 0.1 / len(VOCAB))) < 0.01
    assert abs(outcomes["random"] / total - 0.1 * (1 - 1 / len(VOCAB))) < 0.01
    # Random replacements are uniform over the whole vocabulary, special tokens included.
    random_ids = [outcomes[("random_id", i)] for i in range(len(VOCAB))]
    assert sum(count > 0 for count in random_ids) >= len(VOCAB) - 2
    assert max(random_ids) < 4 * outcomes["random"] / len(VOCAB)


def test_offline_80_10_10():
    ids = sequence(words_of(60), words_of(60))           # 123 pieces -> 18 predictions
    originals, outputs = [], []
    for seed in range(1300):
        output, positions, labels = offline(ids, seed)
        originals += labels
        outputs += [output[p] for p in positions]
    check_80_10_10(count_outcomes(originals, outputs), len(outputs))


def test_in_graph_80_10_10():
    rows = [sequence(words_of(60), words_of(60))] * 1300
    out, ids = in_graph(rows, [5, 6], seq_length=128)
    weights = out["masked_lm_weights"].astype(bool)
    outputs = np.take_along_axis(out["input_word_ids"], out["masked_lm_positions"], 1)[weights]
    check_80_10_10(count_outcomes(out["masked_lm_ids"][weights], outputs), len(outputs))


def test_in_graph_positions_are_uniform_and_padding_is_zero():
    rows = [sequence(words_of(10), words_of(9))] * 4000   # 22 pieces -> 3 of 19 candidates
    out, _ = in_graph(rows, [7, 8], seq_length=24, max_predictions=5)
    assert out["masked_lm_positions"].shape == (4000, 5)
    assert (out["masked_lm_weights"] == [1, 1, 1, 0, 0]).all()
    assert (out["masked_lm_positions"][:, 3:] == 0).all() and (
        out["masked_lm_ids"][:, 3:] == 0).all()
    counts = np.bincount(out["masked_lm_positions"][:, :3].ravel(), minlength=24)
    candidates = [p for p in range(22) if p not in (0, 11, 21)]
    expected = 4000 * 3 / len(candidates)
    assert all(abs(counts[p] - expected) < 5 * np.sqrt(expected) for p in candidates)
    assert counts[[0, 11, 21, 22, 23]].tolist() == [0, 0, 0, 0, 0]


def test_in_graph_is_deterministic_per_seed_and_ignores_padding():
    rows = [sequence("the cat sat on the mat"), sequence(words_of(30), words_of(12))]
    first, ids = in_graph(rows, [1, 2], seq_length=64)
    again, _ = in_graph(rows, [1, 2], seq_length=64)
    other, _ = in_graph(rows, [1, 3], seq_length=64)
    for key in first:
        np.testing.assert_array_equal(first[key], again[key])
    assert not np.array_equal(first["masked_lm_positions"], other["masked_lm_positions"])
    np.testing.assert_array_equal(first["input_word_ids"][0, 8:], 0)


def test_in_graph_rejects_unknown_sequence_length():
    fn = tf.function(lambda ids: mask_batch(ids, ids, VOCAB_INFO, 0.15, 20, False, [1, 2]),
                     input_signature=[tf.TensorSpec([None, None], tf.int32)])
    with pytest.raises(ValueError, match="static sequence length"):
        fn.get_concrete_function()


_MASK_A_BATCH = """
import tensorflow as tf
from bert_tf.data.pretraining.masking import MaskedLmVocab, mask_batch
vocab = MaskedLmVocab(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "un", "##aff", "##able"])
ids = tf.constant([[2, 5, 6, 7, 5, 3, 0, 0]] * 4)
out = tf.function(mask_batch)(ids, tf.cast(ids > 0, tf.int32), vocab, 0.5, 3, False, [1, 2])
print(out["masked_lm_weights"].numpy().sum(axis=1))
"""


@pytest.mark.skipif(not onednn_enabled(), reason="the log line comes from oneDNN's kernels")
def test_in_graph_masking_logs_no_onednn_error():
    # TensorFlow 2.21's oneDNN transpose of an integer tensor logged "E0000 ... util.cc:131]
    # oneDNN supports DT_INT32 only on platforms with AVX-512. Falling back ...", on every
    # machine: a line on the console of every run pre-training on raw text.
    env = {name: value for name, value in os.environ.items() if name != "TF_CPP_MIN_LOG_LEVEL"}
    result = subprocess.run([sys.executable, "-c", _MASK_A_BATCH], capture_output=True,
                            text=True, env=env, cwd=REPO_ROOT, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "[3. 3. 3. 3.]\n"
    assert "oneDNN supports" not in result.stderr, result.stderr
