"""`special_tokens_in_strings=True`: special tokens written in text give Hugging Face's ids."""

import random

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.text.bert_preprocessor import BertPreprocessor
from bert_tf.text.bert_tokenizer import BertTokenizer
from bert_tf.text.special_tokens import cut_at_special_tokens
from tests.text.reference import hf_ids, hf_tokenizer, minilm_vocab
from tests.text.test_bert_tokenizer import STRESS, flat

SPECIALS = ["[CLS]", "[SEP]", "[MASK]", "[PAD]", "[UNK]"]
# Pieces that sit next to special tokens: near-misses of them, punctuation, accents, CJK, emoji,
# spaces, characters that clean-up drops, and a word past the 100-character limit.
FRAGMENTS = SPECIALS + [
    "[cls]", "[Mask]", "[CLS", "CLS]", "[ SEP ]", "[[", "]]", "[", "]", "##", "#", ",", ".",
    "word", "Héllo", "ÅNGSTRÖM", "straße", "中文", "😀", "a", "unaffable", " ", "  ", "\t",
    "\n", "\u3000", "\x00", "\u200b", "\ufffd", "\u0301", "x" * 101, "[unused0]"]

# Each special token at the start, in the middle, at the end, next to punctuation and inside
# words, and the near-misses Hugging Face leaves as text.
HANDWRITTEN = [
    "[CLS] Who wrote it? [SEP] Goethe wrote it. [SEP]", "[CLS]", "a[CLS]b", "x,[MASK].",
    "[[MASK]]", "[PAD][UNK][CLS][SEP][MASK]", "the [MASK] sat on the [MASK]", "end [SEP]",
    "[cls] [Sep] [mask]", "[CL\x00S]", "[ CLS ]", "[MASK", "MASK]", "é[SEP]中", "[SEP]\u200b",
    "unaf[MASK]fable", "[CLS]" * 3, "[", "]", "[]", "", " [MASK] ", "\t[SEP]\n"]


def generated_texts(count, seed):
    rng = random.Random(seed)
    return ["".join(rng.choice(FRAGMENTS) for _ in range(rng.randint(0, 12)))
            for _ in range(count)]


def stress_with_specials():
    """The tokenizer's stress texts with special tokens at their start, middle and end."""
    texts = []
    for index, text in enumerate(STRESS):
        if len(text) > 10_000:
            text = text[:10_000]
        token = SPECIALS[index % len(SPECIALS)]
        middle = len(text) // 2
        texts.append(f"{token}{text[:middle]}{token}{text[middle:]}{token}")
    return texts


TEXTS = HANDWRITTEN + generated_texts(400, seed=17) + stress_with_specials()


@pytest.fixture(scope="module", params=[True, False], ids=["uncased", "cased"])
def pair(request):
    return (BertTokenizer(minilm_vocab(), lower_case=request.param,
                          special_tokens_in_strings=True),
            hf_tokenizer(minilm_vocab(), lower_case=request.param))


def test_ids_equal_hugging_face_on_special_tokens_in_every_position(pair):
    tokenizer, hf = pair
    expected = hf_ids(hf, TEXTS)
    by_word = flat(tokenizer.tokenize(tf.constant(TEXTS)))
    pieces = tf.function(tokenizer.tokenize_to_pieces)(tf.constant(TEXTS)).to_list()
    for text, word_ids, piece_ids, reference in zip(TEXTS, by_word, pieces, expected):
        assert word_ids == reference, f"ids differ for {text[:80]!r}"
        assert piece_ids == reference, f"pieces differ for {text[:80]!r}"
    # Not a vacuous comparison: the special ids are really there, and [cls] is not one.
    assert expected[0][0] == tokenizer.token_id("[CLS]") and expected[0].count(102) == 2
    assert tokenizer.token_id("[CLS]") not in expected[HANDWRITTEN.index("[cls] [Sep] [mask]")]
    assert tokenizer.tokenize(tf.constant([], tf.string)).to_list() == []


def test_offsets_equal_hugging_face_and_each_special_token_is_a_word(pair):
    tokenizer, hf = pair
    ids, starts, ends = tokenizer.tokenize_with_offsets(tf.constant(TEXTS))
    for text, s, e in zip(TEXTS, starts.merge_dims(1, 2).to_list(),
                          ends.merge_dims(1, 2).to_list()):
        char_at = {len(text[:i].encode("utf-8")): i for i in range(len(text) + 1)}
        offsets = hf.encode(text, add_special_tokens=False).offsets
        assert [(char_at[a], char_at[b]) for a, b in zip(s, e)] == offsets, text[:80]
    words = ids[HANDWRITTEN.index("a[CLS]b")].to_list()
    assert words == [[tokenizer.token_id("a")], [101], [tokenizer.token_id("b")]]


def test_invalid_utf8_next_to_special_tokens_is_dropped_like_replacement_characters(pair):
    tokenizer, hf = pair
    raw = [b"\xe2[CLS]\x82", b"[CL\xffS] [SEP]\xc3", b"caf\xe9[MASK]na\xefve", b"\xff[\xff"]
    got = flat(tokenizer.tokenize(tf.constant(raw)))
    assert got == hf_ids(hf, [b.decode("utf-8", errors="replace") for b in raw])


def test_off_by_default_special_tokens_stay_text():
    tokenizer = BertTokenizer(minilm_vocab(), lower_case=True)
    assert not tokenizer.special_tokens_in_strings
    assert flat(tokenizer.tokenize(tf.constant(["[MASK]"]))) == [[1031, 7308, 1033]]


def test_cut_reports_segments_and_token_spans():
    cut = cut_at_special_tokens(tf.constant(["a[CLS]bc[SEP]", "x", "[MASK]["]),
                                {"[CLS]": 101, "[SEP]": 102, "[MASK]": 103})
    assert cut.segments.numpy().tolist() == [b"a", b"bc", b"", b"x", b"", b"["]
    assert cut.segment_starts.numpy().tolist() == [0, 6, 13, 0, 0, 6]
    assert cut.token_ids.numpy().tolist() == [101, 102, 103]
    assert cut.token_starts.numpy().tolist() == [1, 8, 0]
    assert cut.token_ends.numpy().tolist() == [6, 13, 6]
    with pytest.raises(ValueError, match=r"must start with '\['.*got '<s>'"):
        cut_at_special_tokens(tf.constant(["x"]), {"<s>": 0})


def test_preprocessor_packs_special_tokens_written_in_text_and_keeps_the_setting():
    preprocessor = BertPreprocessor(minilm_vocab(), lower_case=True, seq_length=8,
                                    special_tokens_in_strings=True)
    packed = preprocessor((tf.constant(["the [MASK] sat"]), tf.constant(["[SEP]"])))
    np.testing.assert_array_equal(packed["input_word_ids"],
                                  [[101, 1996, 103, 2938, 102, 102, 102, 0]])
    np.testing.assert_array_equal(packed["input_type_ids"], [[0, 0, 0, 0, 0, 1, 1, 0]])
    restored = BertPreprocessor.from_config(preprocessor.get_config())
    assert restored.tokenizer.special_tokens_in_strings
    np.testing.assert_array_equal(restored(tf.constant("[MASK]"))["input_word_ids"][:3],
                                  [101, 103, 102])
