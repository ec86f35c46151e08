"""Vocabulary files: an empty one is refused; learning one: `vocab_size` is a bound, never
passed."""

import pytest
from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib

from bert_tf.text.vocab import RESERVED_TOKENS, learn_vocab, load_vocab

# tf.text's search stops at 19 tokens for 18 on these counts.
COUNTS = {"adfe": 5, "dfba": 6, "acfc": 4, "eb": 10, "ebdf": 1, "db": 10}


def test_the_learned_vocabulary_keeps_to_vocab_size():
    learned = wordpiece_tokenizer_learner_lib.learn(COUNTS, 18, list(RESERVED_TOKENS))
    assert len(learned) == 19 and learned[11:13] == ["db", "eb"]
    # The least frequent word piece goes ("eb", sorted after "db" of the same count); the
    # rarer continuations after it stay: without them a word could not be tokenized.
    assert learn_vocab(COUNTS, 18) == [t for t in learned if t != "eb"]


def test_characters_that_do_not_fit_are_an_error():
    counts = {chr(0x4E00 + i): 3 for i in range(300)}  # 300 CJK characters, each a word
    with pytest.raises(ValueError, match=(
            r"^vocab_size 400 is too small for the 300 characters of the text: they need 605 "
            r"tokens with the reserved ones and the ## continuations; raise vocab_size or "
            r"lower max_unique_chars$")):
        learn_vocab(counts, 400)
    assert len(learn_vocab(counts, 400, max_unique_chars=150)) <= 400


def test_an_empty_vocabulary_file_is_refused(tmp_path):
    # run_pretraining trained with it and copied it beside its checkpoints as their vocab.txt.
    empty = tmp_path / "vocab.txt"
    empty.write_bytes(b"")
    with pytest.raises(ValueError, match=f"^Vocabulary file {empty} is empty.$"):
        load_vocab(str(empty))
