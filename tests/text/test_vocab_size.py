import logging
import re

import pytest

from bert_tf.config import BertConfig
from bert_tf.text.vocab import save_vocab
from bert_tf.text.vocab_size import check_vocab_size

TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b"]


@pytest.fixture
def vocab_file(tmp_path):
    path = str(tmp_path / "vocab.txt")
    save_vocab(TOKENS, path)
    return path


def config(vocab_size):
    return BertConfig(vocab_size=vocab_size, hidden_size=8, num_hidden_layers=1,
                      num_attention_heads=1, intermediate_size=16)


def test_equal_sizes_pass_quietly(vocab_file, caplog):
    with caplog.at_level(logging.WARNING):
        assert check_vocab_size(config(7), vocab_file) == 7
    assert caplog.records == []


def test_a_smaller_config_vocabulary_is_an_error_naming_both(vocab_file):
    message = (f"bert_config.json: vocab_size 5 is smaller than the 7 tokens of {vocab_file}; "
               f"the ids of the last 2 tokens have no embedding")
    with pytest.raises(ValueError, match="^" + re.escape(message)):
        check_vocab_size(config(5), vocab_file, config_file="bert_config.json")


def test_a_larger_config_vocabulary_is_a_one_line_warning(vocab_file, caplog):
    with caplog.at_level(logging.WARNING, logger="bert_tf.text"):
        assert check_vocab_size(config(30522), vocab_file) == 7
    [record] = caplog.records
    assert record.getMessage() == (
        f"the model config: vocab_size 30522 is larger than the 7 tokens of {vocab_file}; the "
        f"last 30515 embedding rows are never used (padded vocabularies do this)")
