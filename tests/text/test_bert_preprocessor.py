import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.config import BertConfig
from bert_tf.models.bert_encoder import BertEncoder
from bert_tf.text.bert_preprocessor import BertPreprocessor
from tests.text.reference import hf_tokenizer, minilm_vocab

PREMISES = ["The cat sat on the mat.", "Ünïcödé text, naïve café!", "", "x " * 200]
HYPOTHESES = ["A cat is sitting.", "中文 and 😀", "Only the second segment.", "y"]


@pytest.fixture(scope="module")
def preprocessor():
    return BertPreprocessor(minilm_vocab(), lower_case=True, seq_length=32)


def hf_packed(texts_a, texts_b, seq_length):
    hf = hf_tokenizer(minilm_vocab(), lower_case=True)
    hf.enable_truncation(seq_length, strategy="longest_first")
    hf.enable_padding(length=seq_length)
    encodings = (hf.encode_batch(list(zip(texts_a, texts_b))) if texts_b
                 else hf.encode_batch(texts_a))
    return {"input_word_ids": [e.ids for e in encodings],
            "input_mask": [e.attention_mask for e in encodings],
            "input_type_ids": [e.type_ids for e in encodings]}


def assert_packed_equal(actual, expected):
    assert sorted(actual) == sorted(expected)
    for key in expected:
        np.testing.assert_array_equal(np.asarray(actual[key]), np.asarray(expected[key]), key)


def test_single_texts_and_pairs_match_the_reference(preprocessor):
    assert_packed_equal(preprocessor(tf.constant(PREMISES)), hf_packed(PREMISES, None, 32))
    assert_packed_equal(preprocessor((tf.constant(PREMISES), tf.constant(HYPOTHESES))),
                        hf_packed(PREMISES, HYPOTHESES, 32))


def test_inside_a_keras_model_with_string_inputs_and_saved_as_keras(preprocessor, tmp_path):
    config = BertConfig.from_dict(dict(
        vocab_size=30522, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=64))
    premise = keras.Input(shape=(), dtype="string", name="premise")
    hypothesis = keras.Input(shape=(), dtype="string", name="hypothesis")
    inputs = preprocessor((premise, hypothesis))
    model = keras.Model([premise, hypothesis], BertEncoder(config)(inputs)["pooled_output"])
    texts = [tf.constant(PREMISES), tf.constant(HYPOTHESES)]
    expected = model(texts)
    assert expected.shape == (4, 16)
    path = os.path.join(tmp_path, "model.keras")
    model.save(path)
    restored = keras.models.load_model(path)
    np.testing.assert_allclose(restored(texts), expected, atol=1e-6)


def test_get_config_round_trip(preprocessor):
    config = preprocessor.get_config()
    assert config["seq_length"] == 32 and config["lower_case"] is True
    assert config["truncation"] == "round_robin" and len(config["vocab"]) == 30522
    clone = BertPreprocessor.from_config(config)
    assert clone.get_config() == config
    assert_packed_equal(clone(tf.constant(PREMISES)), preprocessor(tf.constant(PREMISES)))


def test_in_tf_data_before_and_after_batching(preprocessor):
    batched = tf.data.Dataset.from_tensor_slices((PREMISES, HYPOTHESES)).batch(3).map(
        lambda a, b: preprocessor((a, b)))
    unbatched = tf.data.Dataset.from_tensor_slices((PREMISES, HYPOTHESES)).map(
        lambda a, b: preprocessor((a, b))).batch(3)
    expected = hf_packed(PREMISES, HYPOTHESES, 32)
    for dataset in (batched, unbatched):
        rows = {key: np.concatenate([b[key] for b in dataset.as_numpy_iterator()])
                for key in expected}
        assert_packed_equal(rows, expected)


def test_bad_inputs_are_named(preprocessor):
    with pytest.raises(ValueError, match="input 1 must be a string tensor of shape"):
        preprocessor((tf.constant(["a"]), tf.constant([1])))
    with pytest.raises(ValueError, match="truncation must be one of"):
        BertPreprocessor(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a"], True, truncation="middle")
    with pytest.raises(ValueError, match="has no '\\[CLS\\]' token"):
        BertPreprocessor(["[PAD]", "[UNK]", "[SEP]", "a"], True)


def test_segments_of_different_shapes_are_named(preprocessor):
    # They failed deep in the graph (a stack of mismatched shapes) or blamed the tokenizer.
    with pytest.raises(ValueError, match=r"same batch size, got batch sizes \[2, 1\]"):
        preprocessor((tf.constant(["a", "b"]), tf.constant(["c"])))
    with pytest.raises(ValueError, match=r"all be \[batch\] or all be \[\] \(one text each\), "
                                         r"got shapes \[\(\), \(2,\)\]"):
        preprocessor((tf.constant("a"), tf.constant(["c", "d"])))
    with pytest.raises(ValueError, match=r"one or more segments.*got batch sizes \[\]"):
        preprocessor(())
    with pytest.raises(ValueError, match="seq_length must be an integer of at least 2"):
        BertPreprocessor(minilm_vocab(), lower_case=True, seq_length=2.5)
