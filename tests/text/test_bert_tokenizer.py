import pathlib

import numpy as np
import pytest
import tensorflow as tf
from tokenizers import decoders

from bert_tf.text.bert_tokenizer import BertTokenizer
from bert_tf.text.vocab import load_vocab
from tests.text.reference import hf_ids, hf_tokenizer, minilm_vocab

# Texts that usually break tokenizer parity. Each is checked against the reference as str; the
# byte-level cases below it are checked against the reference's reading of them.
STRESS = [
    "", " ", "\t\n\r ", "\u3000\u00a0\u2028\u2029\u200a",  # empty / whitespace-only
    "Hello, World! It's 3.14$ (approx.) #1 @home ~x^2_y|z` {a}[b]<c>",
    "naïve café Ångström Œuvre İstanbul ŉ ǅ ΣΊΣΥΦΟΣ straße ẞ ﬁsh",  # accents, special casing
    "中文字符测试，日本語のテキスト、한국어 텍스트입니다. 𠀀𪚥𫠠𫠡 豈更",  # CJK (+ext. B/E, compat)
    "مرحبا بالعالم، هذا اختبار. العربية‎ עברית",  # Arabic, RTL marks
    "हिन्दी भाषा का परीक्षण। क़ ড় ো தமிழ்",  # Devanagari, nukta, Bengali/Tamil vowel signs
    "emoji 😀👍🏽 👨‍👩‍👧‍👦 🏳️‍🌈 ❤️ 🇩🇪 keycap 1️⃣",  # emoji, skin tones, ZWJ, flags
    "e\u0301 a\u0308\u0304 Z\u0335\u0321a\u0336\u0327l\u0334g\u0338o",  # combining marks
    "zero\u200bwidth\u200c\u200dand\u2060joiners\ufeffbom\u00adsoft",  # zero-width, format
    "ctrl\x00nul\x01\x02\x07bell\x1b[0m\x7fdel\x85nel\x0bvt\x0cff",  # control characters
    "replacement\ufffdchar \ufffd\ufffd",
    "private\ue000use\U000f0000 unassigned\u0378\U000e0080 noncharacter\ufdd0\uffff",
    "new punctuation \u2e43\u2e52\U00011944 old \u166d format\u0890 marks \u07fd\u1734",
    "Unicode 16 capitals \ua7cb\ua7dc\U00010d50 and \u1c89",
    "a" * 100 + " " + "b" * 101 + " " + "é" * 100 + " " + "é" * 101,  # the 100-char limit
    "x" * 100_000,  # 100k-character word
    ("The quick brown fox. " * 5000).strip(),  # 100k characters of words
    "unaffable unbelievable supercalifragilisticexpialidocious",  # multi-piece words
]

RAW_BYTES = [
    b"invalid \xff\xfe utf8 \xc3\x28 in\xe2\x82word \xed\xa0\x80surrogate \xf8\x88\x80\x80\x80",
    b"truncated at end \xe2\x82",
    b"latin-1 caf\xe9 na\xefve",
    b"\x00\x00\x00",
]


@pytest.fixture(scope="module", params=[True, False], ids=["uncased", "cased"])
def pair(request):
    vocab = minilm_vocab()
    return (BertTokenizer(vocab, lower_case=request.param),
            hf_tokenizer(vocab, lower_case=request.param))


def flat(ragged):
    return ragged.merge_dims(1, 2).to_list()


def test_stress_texts_match_the_reference(pair):
    tokenizer, hf = pair
    got = flat(tokenizer.tokenize(tf.constant(STRESS)))
    expected = hf_ids(hf, STRESS)
    for text, g, e in zip(STRESS, got, expected):
        assert g == e, f"ids differ for {text[:80]!r}"


def test_invalid_utf8_bytes_are_dropped_like_replacement_characters(pair):
    tokenizer, hf = pair
    got = flat(tokenizer.tokenize(tf.constant(RAW_BYTES)))
    assert got == hf_ids(hf, [b.decode("utf-8", errors="replace") for b in RAW_BYTES])


def test_a_megabyte_of_text_tokenizes():
    tokenizer = BertTokenizer(minilm_vocab(), lower_case=True)
    phrase = "Ünïcödé wörds, CJK 中文 and emoji 😀! "
    text = phrase * (1_000_000 // len(phrase.encode("utf-8")) + 1)
    # The reference is quadratic on one huge string: compare on a 100k-character prefix, and
    # check the megabyte by its repetition.
    prefix = text[:100_000 - 100_000 % len(phrase)]
    hf = hf_tokenizer(minilm_vocab(), lower_case=True)
    one, prefix_ids, whole = (flat(tokenizer.tokenize(tf.constant([t])))[0]
                              for t in (phrase, prefix, text))
    assert prefix_ids == hf_ids(hf, [prefix])[0]
    assert len(text.encode("utf-8")) > 1_000_000
    assert whole == one * text.count(phrase)


def test_offsets_match_the_reference_character_offsets(pair):
    tokenizer, hf = pair
    texts = [t for t in STRESS if len(t) < 10_000]
    _, starts, ends = tokenizer.tokenize_with_offsets(tf.constant(texts))
    for text, s, e in zip(texts, starts.merge_dims(1, 2).to_list(),
                          ends.merge_dims(1, 2).to_list()):
        encoding = hf.encode(text, add_special_tokens=False)
        # Ours are byte offsets into the UTF-8 input; the reference counts characters.
        char_at = {len(text[:i].encode("utf-8")): i for i in range(len(text) + 1)}
        assert [(char_at[a], char_at[b]) for a, b in zip(s, e)] == encoding.offsets, text[:80]


def test_word_structure_and_offsets_select_the_word_pieces():
    tokenizer = BertTokenizer(minilm_vocab(), lower_case=True)
    text = "Unaffable CAFÉ, naïve!"
    ids, starts, ends = tokenizer.tokenize_with_offsets(tf.constant([text]))
    vocab = tokenizer.vocab
    pieces = [[vocab[i] for i in word] for word in ids[0].to_list()]
    assert pieces == [["una", "##ffa", "##ble"], ["cafe"], [","], ["naive"], ["!"]]
    data = text.encode("utf-8")
    spans = [data[s:e].decode() for s, e in zip(starts.flat_values.numpy(),
                                                ends.flat_values.numpy())]
    assert spans == ["Una", "ffa", "ble", "CAFÉ", ",", "naïve", "!"]


def test_the_plain_ascii_path_and_the_table_path_agree():
    # Plain-ASCII texts take tf.text's end-to-end WordPiece; the same texts with one non-ASCII
    # character appended take the code-point table path. Both must give the same words.
    for lower_case in (True, False):
        tokenizer = BertTokenizer(minilm_vocab(), lower_case=lower_case)
        ascii_texts = [STRESS[4], STRESS[-2], STRESS[-1], "a" * 101 + " b", "tab\there\r\n"]
        marked = [t + " \u4e2d" for t in ascii_texts]
        plain = tokenizer.tokenize(tf.constant(ascii_texts)).to_list()
        general = tokenizer.tokenize(tf.constant(marked)).to_list()
        assert [g[:len(p)] for p, g in zip(plain, general)] == plain


def test_detokenize_matches_the_reference_decoder(pair):
    tokenizer, hf = pair
    hf.decoder = decoders.WordPiece(prefix="##", cleanup=False)
    texts = STRESS[4:10]
    ids = tokenizer.tokenize(tf.constant(texts))
    expected = [hf.decode(e, skip_special_tokens=False) for e in hf_ids(hf, texts)]
    assert [t.decode("utf-8") for t in tokenizer.detokenize(ids).numpy()] == expected


def test_detokenize_leaves_out_packing_tokens():
    tokenizer = BertTokenizer(minilm_vocab(), lower_case=True)
    packed = tf.constant([[101, 14477, 20961, 3468, 102, 2088, 102, 0, 0]])
    assert tokenizer.detokenize(packed).numpy().tolist() == [b"unaffable world"]


def test_special_token_strings_in_text_are_plain_text():
    # Hugging Face matches its added special tokens in raw text; BERT's FullTokenizer (and this
    # tokenizer) treats "[CLS]" typed by a user as the characters it is.
    tokenizer = BertTokenizer(minilm_vocab(), lower_case=True)
    ids = tokenizer.tokenize(tf.constant(["[CLS] [MASK] ##ing"])).flat_values.numpy()
    assert [tokenizer.vocab[i] for i in ids] == [
        "[", "cl", "##s", "]", "[", "mask", "]", "#", "#", "ing"]


def test_bad_inputs_give_clear_errors(tmp_path):
    tokenizer = BertTokenizer(["[UNK]", "a"], lower_case=True)
    with pytest.raises(ValueError, match="1-D string tensor of texts, got int32"):
        tokenizer.tokenize(tf.constant([1, 2]))
    with pytest.raises(ValueError, match=r"1-D string tensor of texts, got string with shape"):
        tokenizer.tokenize(tf.constant([["a"]]))
    with pytest.raises(ValueError, match="has no '\\[UNK\\]' token"):
        BertTokenizer(["a", "b"], lower_case=True)
    with pytest.raises(ValueError, match="has no '\\[CLS\\]' token"):
        tokenizer.token_id("[CLS]")
    with pytest.raises(ValueError, match="lower_case must be True or False, got 'false'"):
        BertTokenizer(["[UNK]", "a"], lower_case="false")
    with pytest.raises(ValueError, match="special_tokens_in_strings must be True or False"):
        BertTokenizer(["[UNK]", "a"], lower_case=True, special_tokens_in_strings="no")


def test_vocab_as_a_path_object_and_as_a_dict():
    # A pathlib.Path was "not iterable"; a dict was numbered in its order, not by its ids.
    path = pathlib.Path(minilm_vocab())
    texts = tf.constant(["Hello, unaffable world!"])
    assert (BertTokenizer(path, lower_case=True).tokenize(texts).to_list()
            == BertTokenizer(str(path), lower_case=True).tokenize(texts).to_list())
    with pytest.raises(ValueError, match=r"got a dict; pass sorted\(vocab, key=vocab.get\)"):
        BertTokenizer({"a": 1, "[UNK]": 0}, lower_case=True)


def test_vocab_file_errors_name_the_file_and_line(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_bytes(b"[PAD]\n[UNK]\n\nfoo\n")
    with pytest.raises(ValueError, match=r"vocab.txt, line 3: empty token"):
        load_vocab(str(path))
    path.write_bytes(b"[PAD]\nfoo\n[UNK]\nfoo\n")
    with pytest.raises(ValueError, match=r"line 4: token 'foo' repeats line 2"):
        load_vocab(str(path))
    path.write_bytes(b"[PAD]\nfo\xffo\n")
    with pytest.raises(ValueError, match=r"vocab.txt is not valid UTF-8"):
        load_vocab(str(path))
    path.write_bytes("[PAD]\r\n[UNK]\r\nx\u0085y\r\n".encode("utf-8"))  # CRLF, U+0085 inside
    assert load_vocab(str(path)) == ["[PAD]", "[UNK]", "x\u0085y"]


def test_tokenizer_runs_in_tf_function_and_tf_data():
    tokenizer = BertTokenizer(minilm_vocab(), lower_case=True)
    texts = ["Hello world!", "", "naïve café"]
    eager = tokenizer.tokenize(tf.constant(texts))
    traced = tf.function(tokenizer.tokenize)(tf.constant(texts))
    dataset = tf.data.Dataset.from_tensor_slices(texts).batch(2).map(
        lambda t: tokenizer.tokenize(t).merge_dims(1, 2).to_tensor(-1))
    from_data = [row[row >= 0].tolist() for batch in dataset.as_numpy_iterator() for row in batch]
    assert traced.to_list() == eager.to_list()
    assert from_data == flat(eager)
    np.testing.assert_array_equal(eager.flat_values.dtype, tf.int32)


def is_plain_ascii(text):
    return all(c in "\t\n\r" or " " <= c <= "~" for c in text)


@pytest.mark.parametrize("lower_case", [True, False], ids=["uncased", "cased"])
def test_pieces_without_words_and_graph_branches_match_the_reference(lower_case):
    # BertPreprocessor packs from tokenize_to_pieces ([batch, pieces], no word level). In a
    # graph, an all-ASCII batch takes one branch of a tf.cond and any other batch the other:
    # each must give the reference ids, with and without offsets.
    tokenizer = BertTokenizer(minilm_vocab(), lower_case=lower_case)
    hf = hf_tokenizer(minilm_vocab(), lower_case=lower_case)
    spec = [tf.TensorSpec([None], tf.string)]
    pieces = tf.function(tokenizer.tokenize_to_pieces, input_signature=spec)
    with_offsets = tf.function(tokenizer.tokenize_with_offsets, input_signature=spec)
    ascii_texts = [t for t in STRESS if is_plain_ascii(t)]
    assert 0 < len(ascii_texts) < len(STRESS)
    for texts in (STRESS, ascii_texts, ["", " \t"], STRESS[6:8], []):
        expected = hf_ids(hf, texts)
        assert pieces(tf.constant(texts, tf.string)).to_list() == expected
        assert tokenizer.tokenize_to_pieces(tf.constant(texts, tf.string)).to_list() == expected
        graph_ids, graph_starts, graph_ends = with_offsets(tf.constant(texts, tf.string))
        eager_ids, eager_starts, eager_ends = tokenizer.tokenize_with_offsets(
            tf.constant(texts, tf.string))
        assert flat(graph_ids) == expected
        assert graph_ids.to_list() == eager_ids.to_list()
        assert graph_starts.to_list() == eager_starts.to_list()
        assert graph_ends.to_list() == eager_ends.to_list()
