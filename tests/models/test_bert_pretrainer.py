import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf import BertEncoder
from bert_tf.checkpoints import pretraining_head_weights
from bert_tf.models.bert_pretrainer import BertPretrainer
from tests.checkpoints.test_checkpoints import SMALL, random_encoder
from tests.harness import assert_outputs_close
from tests.layers.test_pretraining_heads import numpy_masked_lm
from tests.models.numpy_bert import numpy_bert_forward, numpy_weights


def make_features(config=SMALL, batch=3, seq=9, predictions=4, seed=0):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(3, seq + 1, size=batch)
    mask = (np.arange(seq)[None] < lengths[:, None]).astype(np.int32)
    ids = rng.integers(5, config.vocab_size, size=(batch, seq)).astype(np.int32) * mask
    positions = np.stack([np.sort(rng.choice(np.arange(1, n), predictions)) for n in lengths])
    return {"input_word_ids": tf.constant(ids), "input_mask": tf.constant(mask),
            "input_type_ids": tf.constant((np.arange(seq)[None] >= lengths[:, None] // 2) * mask),
            "masked_lm_positions": tf.constant(positions.astype(np.int32))}


def numpy_pretrainer(encoder_weights, heads, config, features):
    """Google's run_pretraining.py model in NumPy, from the encoder's and the heads' arrays."""
    outputs = numpy_bert_forward(encoder_weights, config, *(
        features[k].numpy() for k in ("input_word_ids", "input_mask", "input_type_ids")))
    mlm = numpy_masked_lm(
        outputs["sequence_output"], features["masked_lm_positions"].numpy(),
        encoder_weights["embeddings/word_embeddings"],
        heads["cls/predictions/transform/dense/kernel"],
        heads["cls/predictions/transform/dense/bias"],
        heads["cls/predictions/transform/LayerNorm/gamma"],
        heads["cls/predictions/transform/LayerNorm/beta"],
        heads["cls/predictions/output_bias"], config.layer_norm_eps)
    nsp = (outputs["pooled_output"] @ heads["cls/seq_relationship/output_weights"].T
           + heads["cls/seq_relationship/output_bias"])
    return {"mlm_logits": mlm, "next_sentence_logits": nsp}


@pytest.fixture(scope="module")
def pretrainer():
    encoder = random_encoder()
    model = BertPretrainer(encoder)
    rng = np.random.default_rng(5)
    for _, variable in pretraining_head_weights(model):
        variable.assign(rng.normal(0, 0.5, variable.shape).astype(np.float32))
    return model


def test_outputs_match_googles_model_with_the_decoder_tied_to_the_word_embeddings(pretrainer):
    features = make_features()
    heads = {name: v.numpy() for name, v in pretraining_head_weights(pretrainer)}
    expected = numpy_pretrainer(numpy_weights(pretrainer.encoder), heads, SMALL, features)
    outputs = pretrainer(features)
    assert set(outputs) == {"mlm_logits", "next_sentence_logits"}
    assert outputs["mlm_logits"].shape == (3, 4, SMALL.vocab_size)
    assert_outputs_close(outputs, expected, atol=2e-4)


def test_only_the_heads_small_weights_are_added(pretrainer):
    h, v = SMALL.hidden_size, SMALL.vocab_size
    heads = h * h + h + 2 * h + v + 2 * h + 2
    assert pretrainer.count_params() == pretrainer.encoder.count_params() + heads
    assert [name for name, _ in pretraining_head_weights(pretrainer)] == [
        "cls/predictions/transform/dense/kernel", "cls/predictions/transform/dense/bias",
        "cls/predictions/transform/LayerNorm/gamma", "cls/predictions/transform/LayerNorm/beta",
        "cls/predictions/output_bias", "cls/seq_relationship/output_weights",
        "cls/seq_relationship/output_bias"]


def test_mlm_gradient_reaches_the_word_embeddings(pretrainer):
    features = make_features(seed=2)
    with tf.GradientTape() as tape:
        logits = pretrainer(features)["mlm_logits"]
        # A token id that is nowhere in the input: its embedding row only acts as a decoder row.
        loss = tf.reduce_sum(logits[..., 4])
    gradient = tape.gradient(loss, pretrainer.encoder.embeddings.word_embeddings)
    rows = tf.convert_to_tensor(gradient)
    assert np.abs(rows[4]).sum() > 0 and 4 not in features["input_word_ids"].numpy()


def test_keras_file_round_trip(pretrainer, tmp_path):
    path = os.path.join(tmp_path, "pretrainer.keras")
    pretrainer.save(path)
    restored = keras.models.load_model(path)
    assert isinstance(restored, BertPretrainer) and restored.encoder.config == SMALL
    features = make_features(seed=4)
    assert_outputs_close(restored(features), pretrainer(features), atol=0)


def test_missing_input_is_named(pretrainer):
    features = make_features()
    del features["masked_lm_positions"]
    with pytest.raises(ValueError, match=r"lack \['masked_lm_positions'\]"):
        pretrainer(features)


def test_heads_stay_float32_under_mixed_precision():
    model = BertPretrainer(BertEncoder(SMALL, dtype="mixed_bfloat16"))
    outputs = model(make_features())
    assert outputs["mlm_logits"].dtype == tf.float32
    assert outputs["next_sentence_logits"].dtype == tf.float32
    # Only the decoder's matmul follows the encoder (see MaskedLMHead).
    assert model.masked_lm.decoder_dtype == "bfloat16"
    assert BertPretrainer(BertEncoder(SMALL)).masked_lm.decoder_dtype == "float32"
