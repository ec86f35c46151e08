"""`WarmupPolynomialDecay`: BERT's learning-rate schedule."""

import keras
import tensorflow as tf


@keras.saving.register_keras_serializable(package="bert_tf")
class WarmupPolynomialDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warmup from 0, then polynomial (by default linear) decay to `end_learning_rate`.

    Exactly Google's `optimization.create_optimizer`: the decay is computed over the *whole*
    run, from step 0 to `num_train_steps`, and the warmup replaces it for the first
    `num_warmup_steps` steps. So at the end of the warmup the rate is
    `peak * (1 - num_warmup_steps / num_train_steps)`, not `peak` (with the paper's 10k warmup
    steps out of 1M the difference is 1%).

        lr(step) = peak * step / num_warmup_steps                            if step < warmup
        lr(step) = (peak - end) * (1 - min(step, total) / total) ** power + end    otherwise

    Example:
        >>> schedule = WarmupPolynomialDecay(1e-4, num_train_steps=100, num_warmup_steps=10)
        >>> [float(schedule(s)) for s in (0, 5, 10, 100)]
        [0.0, 5e-05, 9e-05, 0.0]
    """

    def __init__(self, peak_learning_rate, num_train_steps, num_warmup_steps=0,
                 end_learning_rate=0.0, power=1.0):
        if not num_train_steps > 0:
            raise ValueError(f"num_train_steps must be positive, got {num_train_steps}")
        if not 0 <= num_warmup_steps <= num_train_steps:
            raise ValueError(f"num_warmup_steps must be in [0, num_train_steps={num_train_steps}],"
                             f" got {num_warmup_steps}")
        self.peak_learning_rate = peak_learning_rate
        self.num_train_steps = num_train_steps
        self.num_warmup_steps = num_warmup_steps
        self.end_learning_rate = end_learning_rate
        self.power = power

    def __call__(self, step):
        step = tf.cast(step, tf.float32)
        progress = tf.minimum(step, self.num_train_steps) / self.num_train_steps
        decayed = ((self.peak_learning_rate - self.end_learning_rate)
                   * (1.0 - progress) ** self.power + self.end_learning_rate)
        if not self.num_warmup_steps:
            return decayed
        warmup = self.peak_learning_rate * step / self.num_warmup_steps
        return tf.where(step < self.num_warmup_steps, warmup, decayed)

    def get_config(self):
        return {"peak_learning_rate": self.peak_learning_rate,
                "num_train_steps": self.num_train_steps,
                "num_warmup_steps": self.num_warmup_steps,
                "end_learning_rate": self.end_learning_rate, "power": self.power}
