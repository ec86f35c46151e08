import keras
import numpy as np
import pytest

from bert_tf.training.schedule import WarmupPolynomialDecay


def googles_learning_rate(step, init_lr, num_train_steps, num_warmup_steps):
    """optimization.create_optimizer of Google's BERT, in plain Python: tf.train.polynomial_decay
    (power 1, end 0, no cycle) over num_train_steps, replaced by a linear warmup."""
    decayed = init_lr * (1.0 - min(step, num_train_steps) / num_train_steps)
    if step < num_warmup_steps:
        return init_lr * step / num_warmup_steps
    return decayed


@pytest.mark.parametrize("warmup", [0, 10, 100])
def test_matches_googles_schedule(warmup):
    schedule = WarmupPolynomialDecay(2e-4, num_train_steps=100, num_warmup_steps=warmup)
    steps = [0, 1, 5, 9, 10, 11, 50, 99, 100, 150]
    np.testing.assert_allclose([float(schedule(s)) for s in steps],
                               [googles_learning_rate(s, 2e-4, 100, warmup) for s in steps],
                               rtol=1e-6, atol=1e-12)


def test_power_and_end_learning_rate():
    schedule = WarmupPolynomialDecay(1.0, num_train_steps=10, end_learning_rate=0.1, power=2.0)
    assert float(schedule(5)) == pytest.approx(0.9 * 0.25 + 0.1)
    assert float(schedule(20)) == pytest.approx(0.1)


def test_config_round_trip():
    schedule = WarmupPolynomialDecay(1e-3, 1000, 10, end_learning_rate=1e-5, power=0.5)
    restored = keras.optimizers.schedules.deserialize(
        keras.optimizers.schedules.serialize(schedule))
    assert restored.get_config() == schedule.get_config()
    assert float(restored(500)) == pytest.approx(float(schedule(500)))


@pytest.mark.parametrize("steps,warmup,message", [
    (0, 0, "num_train_steps must be positive"),
    (10, 11, r"num_warmup_steps must be in \[0, num_train_steps=10\]"),
    (10, -1, "num_warmup_steps must be in"),
])
def test_bad_arguments_are_named(steps, warmup, message):
    with pytest.raises(ValueError, match=message):
        WarmupPolynomialDecay(1e-3, steps, warmup)
