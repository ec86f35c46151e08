"""in_batch_halves, and the task models' train step in batch halves: the whole batch's numbers."""

import dataclasses

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf import BertClassifier, BertMultipleChoice
from bert_tf.models import bert_task_model
from bert_tf.models.batch_halves import in_batch_halves
from tests.models.head_fixtures import TINY, tiny_encoder

NO_DROPOUT = dataclasses.replace(TINY, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


@pytest.mark.parametrize("batch_size, halves", [(1, [1, 0]), (4, [2, 2]), (5, [3, 2])])
def test_calls_on_each_half_and_concatenates_nested_outputs(batch_size, halves):
    inputs = {"ids": tf.reshape(tf.range(batch_size * 3), [batch_size, 3]),
              "texts": tf.strings.as_string(tf.range(batch_size))}
    seen = []

    def call(half):
        seen.append([int(tf.shape(half["ids"])[0]), int(tf.shape(half["texts"])[0])])
        return {"doubled": half["ids"] * 2, "pair": (half["texts"], tf.reduce_sum(half["ids"], 1))}

    outputs = in_batch_halves(call, inputs)
    assert seen == [[size, size] for size in halves]
    np.testing.assert_array_equal(outputs["doubled"], inputs["ids"] * 2)
    np.testing.assert_array_equal(outputs["pair"][0], inputs["texts"])
    np.testing.assert_array_equal(outputs["pair"][1], tf.reduce_sum(inputs["ids"], 1))


def _batch(batch_size, shape_tail=(), seed=0):
    rng = np.random.default_rng(seed)
    shape = (batch_size, *shape_tail, TINY.max_position_embeddings)
    mask = (np.arange(shape[-1]) < rng.integers(3, shape[-1] + 1, shape[:-1])[..., None])
    features = {"input_word_ids": (rng.integers(3, TINY.vocab_size, shape) * mask).astype(np.int32),
                "input_mask": mask.astype(np.int32),
                "input_type_ids": np.zeros(shape, np.int32)}
    labels = rng.integers(0, shape_tail[0] if shape_tail else 2, batch_size).astype(np.int32)
    return features, {"logits": labels}


@pytest.mark.parametrize("model_fn, shape_tail", [
    (lambda: BertClassifier(tiny_encoder(seed=1, config=NO_DROPOUT), num_classes=2,
                            dropout_rate=0.0), ()),
    (lambda: BertMultipleChoice(tiny_encoder(seed=1, config=NO_DROPOUT), dropout_rate=0.0),
     (3,))])
@pytest.mark.parametrize("batch_size", [5, 1])
def test_train_step_in_halves_takes_the_whole_batch_step(model_fn, shape_tail, batch_size,
                                                          monkeypatch):
    # Ops side by side on CPU cores: the forward pass runs once per half, and the loss, metric
    # and updated weights are the whole batch's (an odd batch, and a batch of one whose second
    # half is empty, included).
    features, labels = _batch(batch_size, shape_tail)
    results = {}
    for in_halves in (False, True):
        monkeypatch.setattr(bert_task_model, "ops_side_by_side_on_cores", lambda: in_halves)
        model = model_fn()
        calls = []
        model.call = lambda inputs, training=None, call=model.call: (
            calls.append(training), call(inputs, training=training))[1]
        model.compile(optimizer=keras.optimizers.SGD(0.5), metrics={"logits": ["accuracy"]},
                      loss={"logits": keras.losses.SparseCategoricalCrossentropy(
                          from_logits=True)})
        metrics = model.train_on_batch(features, labels, return_dict=True)
        results[in_halves] = metrics, [v.numpy() for v in model.trainable_variables], calls
    (whole_metrics, whole_weights, whole_calls), (halves_metrics, halves_weights, halves_calls) = (
        results[False], results[True])
    assert set(whole_calls) == set(halves_calls) == {True}
    assert len(halves_calls) == 2 * len(whole_calls)  # per trace: one call per half
    assert whole_metrics.keys() == halves_metrics.keys()
    for name in whole_metrics:
        np.testing.assert_allclose(halves_metrics[name], whole_metrics[name], rtol=1e-5,
                                   err_msg=name)
    for whole, halves in zip(whole_weights, halves_weights, strict=True):
        np.testing.assert_allclose(halves, whole, atol=1e-6)
    assert max(np.abs(w - v).max() for w, v in zip(whole_weights, [
        v.numpy() for v in model_fn().trainable_variables])) > 1e-3  # the step did move them


def test_calls_outside_the_train_step_take_the_whole_batch(monkeypatch):
    monkeypatch.setattr(bert_task_model, "ops_side_by_side_on_cores", lambda: True)
    model = BertClassifier(tiny_encoder(seed=1), num_classes=2)
    calls = []
    model.call = lambda inputs, training=None, call=model.call: (
        calls.append(int(tf.shape(inputs["input_word_ids"])[0])), call(inputs, training))[1]
    model(_batch(5)[0], training=True)
    assert calls == [5]
