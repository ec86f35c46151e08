"""A corpus to pre-training inputs (text, vocabulary, records, config), each step done once."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.config import BertConfig
from bert_tf.data.pretraining.corpus import CorpusStatistics, read_document_chunks
from bert_tf.data.pretraining.records_dataset import count_records, record_lengths
from bert_tf.data.pretraining.inputs import prepare_pretraining_inputs
from bert_tf.text.vocab import RESERVED_TOKENS, load_vocab

WORDS = "the cat sat on a mat while dogs ran far away under blue skies".split()


def documents(count):
    """`count` documents of 3-4 sentences of varied words; document i's first sentence names i."""
    return [[f"Document {i} starts here."] + [
        " ".join(WORDS[(i + j + k) % len(WORDS)] for k in range(6)) + "."
        for j in range(2 + i % 2)] for i in range(count)]


def read_text(path):
    return [d for chunk in read_document_chunks([path], 1 << 20, CorpusStatistics())
            for d in chunk]


def never_read():
    raise AssertionError("the documents were read again")
    yield


def test_writes_every_input_once(tmp_path):
    corpus = documents(40)
    settings = dict(config_name="bert_tiny", vocab_size=120, max_seq_length=32,
                    max_predictions_per_seq=5, dupe_factor=2, heldout_every=4,
                    max_passage_sentences=3, num_workers=0)
    inputs = prepare_pretraining_inputs(str(tmp_path), iter(corpus), **settings)
    # Documents of 4 sentences are cut into passages of 3 + 1; every 4th passage held out.
    cut = [p for d in corpus for p in (d[:3], d[3:]) if p]
    assert read_text(inputs.train_text) == [p for i, p in enumerate(cut, 1) if i % 4]
    assert read_text(inputs.heldout_text) == [p for i, p in enumerate(cut, 1) if i % 4 == 0]
    vocab = load_vocab(inputs.vocab_file)
    assert tuple(vocab[:len(RESERVED_TOKENS)]) == RESERVED_TOKENS
    # Frequent words are tokens (uncased: "Document" is "document").
    assert {"cat", "dogs", "document"} <= set(vocab) and len(vocab) <= 120
    config = json.load(open(inputs.bert_config_file))
    assert config == {**BertConfig.from_name("bert_tiny").to_dict(), "vocab_size": len(vocab)}
    assert len(inputs.train_records) == 2
    for path in inputs.train_records + inputs.heldout_records:
        assert record_lengths(path) == (32, 5)
    assert count_records(inputs.train_records) > count_records(inputs.heldout_records) > 0

    written = {path: os.path.getmtime(path) for path in
               [inputs.train_text, inputs.vocab_file, inputs.bert_config_file,
                *inputs.train_records]}
    again = prepare_pretraining_inputs(str(tmp_path), never_read(), **settings)
    assert again == inputs
    assert {path: os.path.getmtime(path) for path in written} == written
    assert not [name for name in os.listdir(tmp_path) if "incomplete" in name]


def test_records_of_other_settings_are_added_beside(tmp_path):
    settings = dict(config_name="bert_tiny", vocab_size=120, dupe_factor=1, heldout_every=4,
                    max_passage_sentences=3, num_workers=0)
    first = prepare_pretraining_inputs(str(tmp_path), iter(documents(40)), max_seq_length=32,
                                       max_predictions_per_seq=5, **settings)
    # A short-sequence phase with more masking: the corpus and vocabulary are reused, and
    # max_predictions_per_seq defaults to ceil(16 * 0.4) = 7.
    short = prepare_pretraining_inputs(str(tmp_path), never_read(), max_seq_length=16,
                                       masked_lm_prob=0.4, **settings)
    assert (short.vocab_file, short.train_text) == (first.vocab_file, first.train_text)
    assert set(short.train_records).isdisjoint(first.train_records)
    assert [record_lengths(path) for path in short.train_records] == [(16, 7)] * 2
    # Held-out records keep the paper's 15 %: ceil(16 * 0.15) = 3 predictions.
    assert record_lengths(short.heldout_records[0]) == (16, 3)
    weights = [np.sum(example.features.feature["masked_lm_weights"].float_list.value)
               for example in map(tf.train.Example.FromString,
                                  tf.data.TFRecordDataset(short.train_records).as_numpy_iterator())]
    assert max(weights) == 6  # round(16 * 0.4) predictions; 15 % would give 2
    # The first settings' records are still the ones returned for them.
    assert prepare_pretraining_inputs(str(tmp_path), never_read(), max_seq_length=32,
                                      max_predictions_per_seq=5, **settings) == first
    assert [record_lengths(path) for path in first.train_records] == [(32, 5)] * 2


def test_too_small_a_corpus_to_hold_out_is_an_error(tmp_path):
    with pytest.raises(ValueError, match="The corpus has 3 passages: too few to hold out one in "
                                         "20"):
        prepare_pretraining_inputs(str(tmp_path), documents(3), config_name="bert_tiny",
                                   vocab_size=100)
    assert not os.path.exists(tmp_path / "corpus")
