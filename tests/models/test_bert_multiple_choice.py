import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.models.bert_multiple_choice import BertMultipleChoice
from tests.harness import assert_outputs_close, check_task_model
from tests.models.head_fixtures import (
    TINY, ToyPreprocessor, dense_numpy, encoder_inputs, fit_losses, save_and_load, tiny_encoder)

# 2 examples x 3 choices x 6 tokens, with different lengths.
INPUTS = encoder_inputs(np.arange(36).reshape(2, 3, 6) % (TINY.vocab_size - 3) + 3,
                        lengths=[[6, 4, 5], [3, 6, 2]])


@pytest.fixture(scope="module")
def chooser():
    return BertMultipleChoice(tiny_encoder())


def test_each_choice_is_scored_as_its_own_sequence(chooser):
    logits = chooser(INPUTS)["logits"].numpy()
    assert logits.shape == (2, 3) and logits.dtype == np.float32
    for example in range(2):
        for choice in range(3):
            single = {key: value[example:example + 1, choice] for key, value in INPUTS.items()}
            pooled = chooser.encoder(single)["pooled_output"]
            np.testing.assert_allclose(logits[example, choice],
                                       dense_numpy(chooser.scorer, pooled)[0, 0], atol=1e-5)


def test_reordering_the_choices_reorders_the_scores(chooser):
    order = [2, 0, 1]
    shuffled = {key: tf.gather(value, order, axis=1) for key, value in INPUTS.items()}
    np.testing.assert_allclose(chooser(shuffled)["logits"],
                               tf.gather(chooser(INPUTS)["logits"], order, axis=1), atol=1e-5)


def test_xla_keras_file_and_checkpoint_round_trips(chooser):
    check_task_model(chooser, INPUTS)


def test_xla_takes_any_number_of_choices(chooser):
    two = {key: value[:, :2] for key, value in INPUTS.items()}
    assert_outputs_close(tf.function(chooser, jit_compile=True)(two), chooser(two), atol=1e-5)
    assert chooser(two)["logits"].shape == (2, 2)


def test_fit_learns_to_pick_the_marked_choice():
    # The right choice is the one containing token 5.
    rng = np.random.default_rng(0)
    ids = rng.integers(6, TINY.vocab_size, (64, 4, 6))
    answers = rng.integers(0, 4, 64)
    ids[np.arange(64), answers, rng.integers(1, 6, 64)] = 5
    chooser = BertMultipleChoice(tiny_encoder())
    losses = fit_losses(chooser, encoder_inputs(ids), answers,
                        keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    assert losses[-1] < 0.75 * losses[0], losses


def test_raw_text_choices_through_a_preprocessor(tmp_path):
    preprocessor = ToyPreprocessor()
    chooser = BertMultipleChoice(tiny_encoder(), preprocessor=preprocessor)
    contexts = tf.constant([["she opened the door"] * 2, ["he sat"] * 2])
    endings = tf.constant([["and walked in", "and the sky"], ["down", "up a tree"]])
    logits = chooser((contexts, endings))["logits"]
    assert logits.shape == (2, 2)
    for example in range(2):
        packed = preprocessor((contexts[example], endings[example]))
        np.testing.assert_allclose(logits[example], dense_numpy(
            chooser.scorer, chooser.encoder(packed)["pooled_output"])[:, 0], atol=1e-5)
    assert_outputs_close(save_and_load(chooser, tmp_path)((contexts, endings)), {"logits": logits},
                         atol=0)


def test_inputs_of_the_wrong_rank_are_clear_errors(chooser):
    flat = {key: value[:, 0] for key, value in INPUTS.items()}
    with pytest.raises(ValueError, match="input '.*' must have rank 3, got shape \\(2, 6\\)"):
        chooser(flat)
    with_text = BertMultipleChoice(tiny_encoder(), preprocessor=ToyPreprocessor())
    with pytest.raises(ValueError, match=r"\[batch, num_choices\] string tensors, got shape \(2,\)"):
        with_text(tf.constant(["one choice", "per example"]))
