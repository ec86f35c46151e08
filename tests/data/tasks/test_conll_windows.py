"""Word-level tags on BERT's first word pieces (`TaggingWindows`), windows over long sentences,
and predictions back to every word."""

import numpy as np
import pytest

from bert_tf.data.tasks.dynamic_padding import padded_batches
from bert_tf.data.tasks.tagging_windows import IGNORED_LABEL, TaggingWindows
from bert_tf.text.bert_tokenizer import BertTokenizer

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "john", "lives", "in", "un", "##aff", "##able",
         "u", ".", "s", "new", "york"]
PAD, UNK, CLS, SEP = 0, 1, 2, 3


@pytest.fixture(scope="module")
def tokenizer():
    return BertTokenizer(VOCAB, lower_case=True)


def test_tag_on_first_piece_others_ignored(tokenizer):
    # "unaffable" -> un ##aff ##able; "U.S." -> u . s . (BERT splits punctuation);
    # "\x00" has no piece at all and gets [UNK] so that it can still be predicted.
    words = ["John", "unaffable", "U.S.", "\x00", "in"]
    windows = TaggingWindows.build([words], tokenizer, 16, [[1, 0, 2, 0, 0]])
    np.testing.assert_array_equal(windows.features["input_word_ids"][0], [
        CLS, 4, 7, 8, 9, 10, 11, 12, 11, UNK, 6, SEP, PAD, PAD, PAD, PAD])
    np.testing.assert_array_equal(windows.features["input_mask"][0], [1] * 12 + [0] * 4)
    np.testing.assert_array_equal(windows.features["input_type_ids"][0], [0] * 16)
    x = IGNORED_LABEL
    np.testing.assert_array_equal(windows.labels[0],
                                  [x, 1, 0, x, x, 2, x, x, x, 0, 0, x, x, x, x, x])
    assert windows.word_positions[0].tolist() == [1, 2, 5, 9, 10]
    assert windows.counts() == {"windows": 1, "sentences": 1, "split_sentences": 0,
                                "empty_words": 1, "truncated_words": 0}


def test_long_sentences_split_at_word_boundaries(tokenizer):
    sentences = [["john", "unaffable", "in", "new", "york"], ["john"],
                 ["unaffable", "unaffable", "john"]]
    tags = [[1, 2, 3, 4, 5], [6], [7, 8, 9]]
    # 6 positions: [CLS] + at most 4 pieces + [SEP].
    windows = TaggingWindows.build(sentences, tokenizer, 6, tags)
    assert windows.sentence_index.tolist() == [0, 0, 1, 2, 2]
    np.testing.assert_array_equal(windows.features["input_word_ids"], [
        [CLS, 4, 7, 8, 9, SEP],           # john unaffable
        [CLS, 6, 13, 14, SEP, PAD],       # in new york
        [CLS, 4, SEP, PAD, PAD, PAD],
        [CLS, 7, 8, 9, SEP, PAD],         # one word per window
        [CLS, 7, 8, 9, 4, SEP]])
    assert windows.counts()["split_sentences"] == 2
    # Every word is predicted exactly once, from its first piece, in order.
    logits = np.eye(10)[windows.labels.clip(0)]          # one-hot of the gold tags
    assert windows.word_predictions(logits) == tags


def test_word_longer_than_a_window_keeps_its_first_pieces(tokenizer):
    windows = TaggingWindows.build([["in", "unaffable"]], tokenizer, 4, [[1, 2]])
    np.testing.assert_array_equal(windows.features["input_word_ids"],
                                  [[CLS, 6, SEP, PAD], [CLS, 7, 8, SEP]])
    assert windows.counts()["truncated_words"] == 1
    assert windows.word_predictions(windows.labels) == [[1, 2]]


def test_dynamic_padding_trims_labels_with_inputs(tokenizer):
    windows = TaggingWindows.build([["john", "lives"], ["in"]], tokenizer, 32, [[1, 0], [0]])
    features, labels = next(iter(padded_batches(windows.dataset(), 2, 32, pad_to_multiple_of=8)))
    assert features["input_word_ids"].shape == (2, 8) and labels.shape == (2, 8)
    np.testing.assert_array_equal(labels, windows.labels[:, :8])


def test_prediction_without_tags_and_bad_lengths(tokenizer):
    windows = TaggingWindows.build([["john", "lives"]], tokenizer, 8)
    assert (windows.labels == IGNORED_LABEL).all()
    with pytest.raises(ValueError, match="logits for 2 windows, expected 1"):
        windows.word_predictions(np.zeros([2, 8, 3]))
    with pytest.raises(ValueError, match="max_seq_length must be at least 3"):
        TaggingWindows.build([["john"]], tokenizer, 2)
