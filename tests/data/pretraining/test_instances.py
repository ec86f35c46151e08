"""Google's instance-creation algorithm on small corpora whose every word is unique, so that
where each piece of A and B came from can be checked exactly."""

import itertools
import random

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.data.pretraining.masking import MaskedLmVocab
from bert_tf.data.pretraining.records_dataset import feature_spec
from bert_tf.data.pretraining.instances import PretrainingInstanceBuilder, truncate_seq_pair
from tests.data.pretraining.toy_corpus import CLS, SEP, VOCAB, numbered_documents, word_ids

VOCAB_INFO = MaskedLmVocab(VOCAB)
# Sentences of 3 pieces and 12 pieces per pair (max_seq_length 15): a chunk reaches its target
# exactly, so nothing is ever truncated and every boundary can be checked.
SENTENCE = 3
MAX_SEQ_LENGTH = 15


def corpus(sentences_per_document):
    documents = numbered_documents(sentences_per_document, SENTENCE)
    as_ids = [[word_ids(sentence) for sentence in document] for document in documents]
    # Where each word is: (document, sentence).
    where = {}
    for d, document in enumerate(as_ids):
        for s, sentence in enumerate(document):
            for token in sentence:
                where[token] = (d, s)
    return as_ids, where


def builder(**options):
    options = {"max_seq_length": MAX_SEQ_LENGTH, "max_predictions_per_seq": 4,
               "short_seq_prob": 0.0, "dupe_factor": 1, **options}
    return PretrainingInstanceBuilder(VOCAB_INFO, **options)


def unmasked(instance):
    tokens = list(instance.input_ids)
    for position, label in zip(instance.masked_lm_positions, instance.masked_lm_ids):
        tokens[position] = label
    return tokens


def split_pair(instance):
    """A and B (unmasked ids) after checking the [CLS] A [SEP] B [SEP] layout."""
    tokens = unmasked(instance)
    first_sep = tokens.index(SEP)
    a, b = tokens[1:first_sep], tokens[first_sep + 1:-1]
    assert tokens[0] == CLS and tokens[-1] == SEP and SEP not in b and CLS not in a + b
    assert instance.segment_ids == [0] * (len(a) + 2) + [1] * (len(b) + 1)
    assert a and b and len(tokens) <= MAX_SEQ_LENGTH
    return a, b


def sentences_of(tokens, where):
    """The (document, sentence) of each whole sentence in `tokens`, checking that they are
    whole and consecutive."""
    assert len(tokens) % SENTENCE == 0
    spans = [where[tokens[i]] for i in range(0, len(tokens), SENTENCE)]
    for i, (d, s) in enumerate(spans):
        assert tokens[i * SENTENCE:(i + 1) * SENTENCE] == list(
            range(tokens[i * SENTENCE], tokens[i * SENTENCE] + SENTENCE))
        assert all(where[t] == (d, s) for t in tokens[i * SENTENCE:(i + 1) * SENTENCE])
        if i:
            assert spans[i - 1] == (d, s - 1)
    return spans


def test_pairs_are_whole_sentences_and_next_means_next():
    documents, where = corpus([1, 2, 5, 8, 3, 9, 4, 7])
    instances = builder().create_training_instances(documents, random.Random(1))
    random_next = 0
    for instance in instances:
        a, b = split_pair(instance)
        a_sentences, b_sentences = sentences_of(a, where), sentences_of(b, where)
        if instance.is_random_next:
            random_next += 1
            assert b_sentences[0][0] != a_sentences[0][0]     # another document
        else:
            assert b_sentences[0] == (a_sentences[-1][0], a_sentences[-1][1] + 1)
            # A and B fill the target of 12 pieces, or end with the document.
            last_document, last_sentence = b_sentences[-1]
            assert (len(a) + len(b) == MAX_SEQ_LENGTH - 3
                    or last_sentence == len(documents[last_document]) - 1)
    assert 0 < random_next < len(instances)


def test_every_sentence_starts_in_a_or_follows_as_actual_next():
    # Sentences a random B displaced are "put back": none of the text goes unused.
    documents, where = corpus([6, 1, 9, 4, 11, 2])
    for seed in range(5):
        used = set()
        for instance in builder().create_training_instances(documents, random.Random(seed)):
            a, b = split_pair(instance)
            used.update(sentences_of(a, where))
            if not instance.is_random_next:
                used.update(sentences_of(b, where))
        assert used == {(d, s) for d, document in enumerate(documents)
                        for s in range(len(document))}


def test_a_sentence_longer_than_a_sequence_is_cut_into_pieces_that_pair_whole():
    # Documents of one line each (a web page or a book per line): the original made one
    # instance of each and truncated the rest away, as `builder` does by default.
    documents = [[word_ids(sentence) for sentence in document]
                 for document in numbered_documents([1, 1, 1], 40)]
    sentence = documents[0][0]
    assert builder(max_seq_length=16).sentence_pieces(sentence) == [sentence]
    instance_builder = builder(max_seq_length=16, cut_long_sentences=True)  # 13 pieces a pair
    assert instance_builder.sentence_pieces(sentence[:13]) == [sentence[:13]]
    pieces = instance_builder.sentence_pieces(sentence)
    assert [len(piece) for piece in pieces] == [6, 7, 6, 7, 6, 7, 1]
    assert [t for piece in pieces for t in piece] == sentence
    cut = [[piece for s in document for piece in instance_builder.sentence_pieces(s)]
           for document in documents]
    # Where each token is: (document, position), and where pieces start or end.
    where = {t: (d, i) for d, document in enumerate(cut)
             for i, t in enumerate(t for piece in document for t in piece)}
    bounds = {(d, i) for d, document in enumerate(cut)
              for i in itertools.accumulate([0] + [len(piece) for piece in document])}
    for seed in range(5):
        used = set()
        for instance in instance_builder.create_training_instances(cut, random.Random(seed)):
            tokens = unmasked(instance)
            first_sep = tokens.index(SEP)
            a, b = tokens[1:first_sep], tokens[first_sep + 1:-1]
            (document, start), end = where[a[0]], where[a[-1]][1] + 1
            # A is whole pieces (never truncated), and an actual B the whole pieces after it.
            assert {(document, start), (document, end)} <= bounds
            assert [where[t] for t in a] == [(document, i) for i in range(start, end)]
            used.update(a)
            if not instance.is_random_next:
                assert [where[t] for t in b] == [(document, end + i) for i in range(len(b))]
                assert (document, end + len(b)) in bounds
                used.update(b)
        assert used == {t for document in documents for s in document for t in s}


def test_random_next_half_of_the_time():
    documents, _ = corpus([12] * 5)
    instances = builder(dupe_factor=100).create_training_instances(documents, random.Random(2))
    share = np.mean([instance.is_random_next for instance in instances])
    # 50 % by the coin, a little more from single-sentence chunks at document ends.
    assert len(instances) > 1500 and 0.48 < share < 0.58


def test_short_seq_prob_draws_shorter_targets():
    documents, _ = corpus([15] * 4)
    builder_long = builder(max_seq_length=40, short_seq_prob=0.0, dupe_factor=30)
    builder_short = builder(max_seq_length=40, short_seq_prob=1.0, dupe_factor=30)
    long_lengths = [len(i.input_ids) for i in builder_long.create_training_instances(
        documents, random.Random(3))]
    short_lengths = [len(i.input_ids) for i in builder_short.create_training_instances(
        documents, random.Random(3))]
    # Full targets (37 pieces) fill about half of the sequences (the others end with their
    # document or their random document); targets drawn uniformly from [2, 37] rarely do.
    assert np.mean(np.array(long_lengths) >= 39) > 0.4
    assert np.mean(np.array(short_lengths) >= 39) < 0.1
    assert np.mean(short_lengths) < 0.7 * np.mean(long_lengths)


def test_truncation_takes_the_longer_side_from_both_ends():
    fronts = backs = 0
    for seed in range(40):
        a, b = list(range(10)), [100, 101]
        truncate_seq_pair(a, b, 6, random.Random(seed))
        assert b == [100, 101] and len(a) == 4
        assert a == list(range(a[0], a[0] + 4))        # a contiguous run of the original
        fronts += a[0] > 0
        backs += a[-1] < 9
        # On a tie, B is shortened.
        a, b = [1, 2, 3], [4, 5, 6]
        truncate_seq_pair(a, b, 5, random.Random(seed))
        assert a == [1, 2, 3] and b in ([5, 6], [4, 5])
    assert fronts > 10 and backs > 10


def test_truncated_pairs_fit():
    documents, _ = corpus([4, 7, 2, 9])
    long_sentences = [[sentence * 5 for sentence in document] for document in documents]
    for instance in builder(max_seq_length=11, dupe_factor=5).create_training_instances(
            long_sentences, random.Random(4)):
        assert len(instance.input_ids) == 11
        split_pair(instance)


def test_dupe_factor_repeats_documents_with_fresh_masks():
    # Two one-sentence documents: each pass makes one instance per document, always with a
    # random next sentence (a single sentence cannot be split), from the other document.
    documents = [[word_ids("w0 w1 w2 w3 w4 w5 w6 w7")], [word_ids("w10 w11 w12")]]
    instances = builder(dupe_factor=5, max_predictions_per_seq=20).create_training_instances(
        documents, random.Random(5))
    assert len(instances) == 10
    firsts = [i for i in instances if unmasked(i)[1] == word_ids("w0")[0]]
    assert len(firsts) == 5
    for instance in instances:
        assert instance.is_random_next
    for instance in firsts:
        assert split_pair(instance) == (documents[0][0], documents[1][0])
    assert len({tuple(i.masked_lm_positions) for i in firsts}) > 1


def test_single_document_corpus_still_gives_random_next():
    # As the original: after 10 tries for another document, B comes from the same one.
    documents, where = corpus([1])
    instances = builder(dupe_factor=3).create_training_instances(documents, random.Random(6))
    assert len(instances) == 3 and all(i.is_random_next for i in instances)
    for instance in instances:
        assert split_pair(instance) == (documents[0][0], documents[0][0])


def test_same_seed_same_instances_and_input_untouched():
    documents, _ = corpus([3, 5, 2, 6])
    copy = [list(map(list, document)) for document in documents]
    first = builder(dupe_factor=3).create_training_instances(documents, random.Random(7))
    again = builder(dupe_factor=3).create_training_instances(documents, random.Random(7))
    other = builder(dupe_factor=3).create_training_instances(documents, random.Random(8))
    assert first == again and first != other
    assert documents == copy


def test_serialized_record_parses_to_the_padded_instance():
    instance_builder = builder(max_seq_length=12, max_predictions_per_seq=5)
    documents = [[word_ids("w0 w1 w2"), word_ids("w3 w4")], [word_ids("w5 w6 w7")]]
    instance = instance_builder.create_training_instances(documents, random.Random(9))[0]
    parsed = tf.io.parse_single_example(instance_builder.serialize(instance),
                                        feature_spec(12, 5))
    n, p = len(instance.input_ids), len(instance.masked_lm_positions)
    assert parsed["input_ids"].numpy().tolist() == instance.input_ids + [0] * (12 - n)
    assert parsed["input_mask"].numpy().tolist() == [1] * n + [0] * (12 - n)
    assert parsed["segment_ids"].numpy().tolist() == instance.segment_ids + [0] * (12 - n)
    assert parsed["masked_lm_positions"].numpy().tolist() == (
        instance.masked_lm_positions + [0] * (5 - p))
    assert parsed["masked_lm_ids"].numpy().tolist() == instance.masked_lm_ids + [0] * (5 - p)
    assert parsed["masked_lm_weights"].numpy().tolist() == [1.0] * p + [0.0] * (5 - p)
    assert parsed["next_sentence_labels"].numpy().tolist() == [int(instance.is_random_next)]


@pytest.mark.parametrize("option,value,message", [
    ("max_seq_length", 4, "max_seq_length must be at least 5"),
    ("max_predictions_per_seq", 0, "max_predictions_per_seq must be at least 1"),
    ("masked_lm_prob", 0.0, r"masked_lm_prob must be in \(0, 1\]"),
    ("short_seq_prob", 1.5, r"short_seq_prob must be in \[0, 1\]"),
    ("dupe_factor", 0, "dupe_factor must be at least 1"),
])
def test_bad_options_are_named(option, value, message):
    with pytest.raises(ValueError, match=message):
        builder(**{option: value})


def googles_truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng):
    """create_pretraining_data.py's own loop, one piece at a time: the reference."""
    while len(tokens_a) + len(tokens_b) > max_num_tokens:
        trunc_tokens = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
        if rng.random() < 0.5:
            del trunc_tokens[0]
        else:
            trunc_tokens.pop()


@pytest.mark.parametrize("seed", range(30))
def test_truncation_cuts_the_pieces_googles_loop_cuts_with_the_same_draws(seed):
    lengths = random.Random(seed).choices(range(0, 300), k=3)
    a, b = list(range(lengths[0])), list(range(1000, 1000 + lengths[1]))
    expected_a, expected_b, expected_rng = list(a), list(b), random.Random(seed)
    googles_truncate_seq_pair(expected_a, expected_b, lengths[2], expected_rng)
    rng = random.Random(seed)
    truncate_seq_pair(a, b, lengths[2], rng)
    assert (a, b) == (expected_a, expected_b)
    assert rng.random() == expected_rng.random()  # as many draws: the next records match too
