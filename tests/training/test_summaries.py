"""`ScalarSummaries` during a Keras `fit`: the curves it writes, examples per second included."""

import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.training import summaries
from bert_tf.training.scalar_logs import read_scalars


class TickingClock:
    """Stands for the `time` module of `summaries`: each reading is one second later."""

    def __init__(self):
        self.now = 0.0

    def perf_counter(self):
        self.now += 1.0
        return self.now


def fit(log_dir, num_examples, batch_size, every_n_steps, learning_rate=0.1,
        steps_per_execution=1):
    """The model and features of a one-epoch fit of a linear model to the features' first
    column, logged by `ScalarSummaries`."""
    keras.utils.set_random_seed(1)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(learning_rate), loss="mse",
                  steps_per_execution=steps_per_execution)
    features = np.random.default_rng(0).normal(size=(num_examples, 3)).astype("float32")
    dataset = tf.data.Dataset.from_tensor_slices((features, features[:, :1])).batch(batch_size)
    model.fit(dataset, epochs=1, verbose=0, shuffle=False,
              callbacks=[summaries.ScalarSummaries(str(log_dir), every_n_steps=every_n_steps)])
    return model, features


def test_each_write_holds_the_mean_loss_of_its_own_steps(tmp_path):
    # Learning rate 0: the weights stay as initialised, so every example's loss is known.
    # Keras' logs are means since the epoch's start; the curve must show each stretch's own.
    model, features = fit(tmp_path, num_examples=38, batch_size=4, every_n_steps=4,
                          learning_rate=0.0)
    kernel, bias = (weight.numpy() for weight in model.layers[0].weights)
    squared_errors = ((features @ kernel + bias)[:, 0] - features[:, 0]) ** 2
    losses = [(event.step, event.value) for event in read_scalars(str(tmp_path / "train"))["loss"]]
    expected = [(4, squared_errors[:16].mean()), (8, squared_errors[16:32].mean()),
                (10, squared_errors[32:].mean())]
    assert [step for step, _ in losses] == [step for step, _ in expected]
    np.testing.assert_allclose([value for _, value in losses],
                               [value for _, value in expected], rtol=1e-5)


def test_with_several_steps_per_call_a_write_falls_due_when_a_multiple_is_passed(tmp_path):
    # 10 steps, 3 per host call (Keras calls back at steps 3, 6, 9 and 10), a write every 4:
    # at 6 (past 4), at 9 (past 8) and at the end, each with its own steps' mean loss.
    model, features = fit(tmp_path, num_examples=38, batch_size=4, every_n_steps=4,
                          learning_rate=0.0, steps_per_execution=3)
    kernel, bias = (weight.numpy() for weight in model.layers[0].weights)
    squared_errors = ((features @ kernel + bias)[:, 0] - features[:, 0]) ** 2
    losses = [(event.step, event.value) for event in read_scalars(str(tmp_path / "train"))["loss"]]
    assert [step for step, _ in losses] == [6, 9, 10]
    np.testing.assert_allclose([value for _, value in losses],
                               [squared_errors[:24].mean(), squared_errors[24:36].mean(),
                                squared_errors[36:].mean()], rtol=1e-5)


def test_examples_per_second_counts_the_examples_of_each_stretch(tmp_path, monkeypatch):
    monkeypatch.setattr(summaries, "time", TickingClock())
    # 38 examples at batch 4: 10 steps, the last of 2 examples; a write every 4 steps and at
    # the end. One second passes between two writes (and from the start to the first).
    fit(tmp_path, num_examples=38, batch_size=4, every_n_steps=4)
    curves = read_scalars(str(tmp_path / "train"))
    rates = [(event.step, event.value) for event in curves["examples_per_second"]]
    assert rates == [(4, 16.0), (8, 16.0), (10, 6.0)]
    assert [event.step for event in curves["loss"]] == [4, 8, 10]


def test_examples_per_second_is_positive_and_finite_on_the_real_clock(tmp_path):
    fit(tmp_path, num_examples=64, batch_size=8, every_n_steps=2)
    rates = [event.value for event in read_scalars(str(tmp_path / "train"))
             ["examples_per_second"]]
    assert len(rates) == 4
    assert all(math.isfinite(rate) and rate > 0 for rate in rates), rates


def test_the_learning_rate_is_written_with_the_logs_once_per_step(tmp_path):
    fit(tmp_path, num_examples=24, batch_size=4, every_n_steps=3)
    rates = read_scalars(str(tmp_path / "train"))["learning_rate"]
    assert [(event.step, event.value) for event in rates] == [(3, pytest.approx(0.1)),
                                                              (6, pytest.approx(0.1))]
