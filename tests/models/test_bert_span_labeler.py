import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.metrics.squad_postprocess import decode_answer
from bert_tf.models.bert_span_labeler import PADDING_LOGIT, BertSpanLabeler
from tests.harness import assert_outputs_close, check_task_model
from tests.models.head_fixtures import (
    TINY, ToyPreprocessor, dense_numpy, encoder_inputs, fit_losses, save_and_load, tiny_encoder)

INPUTS = encoder_inputs(np.arange(3, 3 + 3 * 9).reshape(3, 9) % TINY.vocab_size,
                        lengths=[9, 5, 2])


@pytest.fixture(scope="module")
def labeler():
    return BertSpanLabeler(tiny_encoder())


def test_logits_are_dense_on_each_token_and_padding_is_masked(labeler):
    outputs = labeler(INPUTS)
    assert set(outputs) == {"start_logits", "end_logits"}
    sequence = labeler.encoder(INPUTS)["sequence_output"]
    expected = dense_numpy(labeler.span_logits, sequence)         # [batch, seq, 2]
    mask = INPUTS["input_mask"].numpy().astype(bool)
    for index, name in enumerate(("start_logits", "end_logits")):
        logits = outputs[name].numpy()
        assert logits.shape == (3, 9) and logits.dtype == np.float32
        np.testing.assert_allclose(logits[mask], expected[..., index][mask], atol=1e-6)
        np.testing.assert_array_equal(logits[~mask], PADDING_LOGIT)
    # Padding is never the argmax, even when every real logit is very negative.
    assert (outputs["start_logits"].numpy().argmax(-1) < [9, 5, 2]).all()


def test_no_answer_position_cls_is_never_masked(labeler):
    outputs = labeler(encoder_inputs([[1, 2, 0, 0]], lengths=[2]))
    assert outputs["start_logits"][0, 0] > PADDING_LOGIT
    assert outputs["end_logits"][0, 0] > PADDING_LOGIT


def test_xla_keras_file_and_checkpoint_round_trips(labeler):
    check_task_model(labeler, INPUTS)


def test_fit_learns_to_point_at_marked_tokens():
    # The answer starts at token 5 and ends at token 6, placed at random positions; the
    # sequences have random lengths, so the padding mask is exercised in training too.
    rng = np.random.default_rng(0)
    ids = rng.integers(7, TINY.vocab_size, (64, 10))
    lengths = rng.integers(6, 11, 64)
    starts = rng.integers(1, lengths - 2)
    ends = starts + rng.integers(0, 2, 64) + 1
    ids[np.arange(64), starts] = 5
    ids[np.arange(64), ends] = 6
    labeler = BertSpanLabeler(tiny_encoder())
    cross_entropy = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    losses = fit_losses(labeler, encoder_inputs(ids, lengths),
                        {"start_logits": starts, "end_logits": ends},
                        {"start_logits": cross_entropy, "end_logits": cross_entropy},
                        loss_weights={"start_logits": 0.5, "end_logits": 0.5})
    assert losses[-1] < 0.5 * losses[0], losses


def test_question_and_context_strings_through_a_preprocessor(tmp_path):
    preprocessor = ToyPreprocessor(seq_length=12)
    labeler = BertSpanLabeler(tiny_encoder(), preprocessor=preprocessor)
    pair = (tf.constant(["who wrote it", "when"]), tf.constant(["she wrote it in 1900", "now"]))
    outputs = labeler(pair)
    assert_outputs_close(outputs, labeler(preprocessor(pair)), atol=0)
    assert outputs["start_logits"].shape == (2, 12)
    assert_outputs_close(save_and_load(labeler, tmp_path)(pair), outputs, atol=0)


def test_decoded_answer_lies_in_the_context_never_in_padding(labeler):
    # [CLS] q q [SEP] w0 w1 w2 [SEP] [PAD] [PAD]: the context "ab cd ef" is positions 4-6.
    context = "ab cd ef"
    offsets = [[-1, -1]] * 4 + [[0, 2], [3, 5], [6, 8]] + [[-1, -1]] * 3
    inputs = encoder_inputs([[1, 9, 10, 2, 11, 12, 13, 2, 0, 0]], lengths=[8])
    outputs = labeler(inputs)
    answer = decode_answer(context, [{"start_logits": outputs["start_logits"][0].numpy(),
                                      "end_logits": outputs["end_logits"][0].numpy(),
                                      "token_offsets": offsets}], version_2_with_negative=True)
    texts = [entry["text"] for entry in answer["nbest"]]
    assert set(texts) <= {"", "ab", "ab cd", "ab cd ef", "cd", "cd ef", "ef"}
    assert len(texts) == 7       # all six spans and "no answer"
    np.testing.assert_allclose(sum(entry["probability"] for entry in answer["nbest"]), 1.0)
