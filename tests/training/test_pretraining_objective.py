import numpy as np
import pytest
import tensorflow as tf

from bert_tf.training.pretraining_objective import (METRICS, STATISTICS, pretraining_loss,
                                                    pretraining_metrics, pretraining_statistics)


def make_batch(batch=6, predictions=4, vocab=7, seed=0):
    rng = np.random.default_rng(seed)
    weights = (rng.random((batch, predictions)) < 0.7).astype(np.float32)
    weights[0] = 0.0  # an example with no real prediction
    outputs = {"mlm_logits": tf.constant(rng.normal(size=(batch, predictions, vocab)), tf.float32),
               "next_sentence_logits": tf.constant(rng.normal(size=(batch, 2)), tf.float32)}
    features = {"masked_lm_ids": tf.constant(rng.integers(vocab, size=(batch, predictions))),
                "masked_lm_weights": tf.constant(weights),
                "next_sentence_labels": tf.constant(rng.integers(2, size=batch)),
                "input_mask": tf.ones([batch, 5], tf.int32)}
    return outputs, features


def log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def googles_loss(outputs, features):
    """run_pretraining.py's get_masked_lm_output + get_next_sentence_output losses in NumPy."""
    log_probs = log_softmax(outputs["mlm_logits"].numpy())
    ids, weights = features["masked_lm_ids"].numpy(), features["masked_lm_weights"].numpy()
    per_prediction = -np.take_along_axis(log_probs, ids[..., None], -1)[..., 0]
    mlm = (weights * per_prediction).sum() / (weights.sum() + 1e-5)
    nsp_log_probs = log_softmax(outputs["next_sentence_logits"].numpy())
    labels = features["next_sentence_labels"].numpy()
    nsp = -nsp_log_probs[np.arange(len(labels)), labels].mean()
    return mlm + nsp, mlm, nsp


def test_loss_is_googles_on_one_batch():
    outputs, features = make_batch()
    stats = pretraining_statistics(outputs, features)
    loss = pretraining_loss(stats, stats["masked_lm_weight"], stats["examples"])
    np.testing.assert_allclose(loss, googles_loss(outputs, features)[0], rtol=1e-6)


def test_shares_of_a_split_batch_sum_to_the_whole_batch_loss():
    outputs, features = make_batch(batch=8, seed=1)
    whole = googles_loss(outputs, features)[0]
    stats = pretraining_statistics(outputs, features)
    total = 0.0
    for part in (slice(0, 3), slice(3, 8)):  # uneven parts, uneven real predictions
        share = pretraining_statistics({k: v[part] for k, v in outputs.items()},
                                       {k: v[part] for k, v in features.items()})
        total += pretraining_loss(share, stats["masked_lm_weight"], stats["examples"])
    np.testing.assert_allclose(total, whole, rtol=1e-6)


def test_metrics_are_the_weighted_means_of_googles_evaluation():
    outputs, features = make_batch(seed=2)
    stats = {k: v.numpy() for k, v in pretraining_statistics(outputs, features).items()}
    assert set(stats) == set(STATISTICS)
    metrics = pretraining_metrics(stats)
    assert list(metrics) == list(METRICS)
    _, mlm, nsp = googles_loss(outputs, features)
    weights = features["masked_lm_weights"].numpy()
    predicted = outputs["mlm_logits"].numpy().argmax(-1)
    accuracy = (weights * (predicted == features["masked_lm_ids"].numpy())).sum() / weights.sum()
    nsp_accuracy = (outputs["next_sentence_logits"].numpy().argmax(-1)
                    == features["next_sentence_labels"].numpy()).mean()
    np.testing.assert_allclose(
        [metrics[k] for k in METRICS], [mlm + nsp, mlm, accuracy, nsp, nsp_accuracy], rtol=1e-5)


def test_padding_examples_count_for_nothing():
    outputs, features = make_batch(seed=3)
    padded_outputs = {k: tf.concat([v, v[:2] * 3.0], 0) for k, v in outputs.items()}
    padding = {"masked_lm_ids": tf.zeros([2, 4], tf.int64),
               "masked_lm_weights": tf.zeros([2, 4]),
               "next_sentence_labels": tf.zeros([2], tf.int64),
               "input_mask": tf.zeros([2, 5], tf.int32)}
    padded_features = {k: tf.concat([v, tf.cast(padding[k], v.dtype)], 0)
                       for k, v in features.items()}
    plain = pretraining_statistics(outputs, features)
    padded = pretraining_statistics(padded_outputs, padded_features)
    for name in STATISTICS:
        np.testing.assert_allclose(padded[name], plain[name], rtol=1e-6, err_msg=name)
    assert float(padded["examples"]) == 6.0


def test_batch_without_real_predictions_has_a_finite_loss():
    outputs, features = make_batch()
    features["masked_lm_weights"] = tf.zeros_like(features["masked_lm_weights"])
    stats = pretraining_statistics(outputs, features)
    assert np.isfinite(pretraining_loss(stats, stats["masked_lm_weight"], stats["examples"]))
    assert pretraining_metrics(stats)["masked_lm_accuracy"] == pytest.approx(0.0)
