"""The pre-training optimizers: AdamW or LAMB, no weight decay on LayerNorm and biases,
global-norm clipping, optional loss scaling.

Gradients reach these optimizers already summed over replicas. The train step sums them
itself because global-norm clipping must see the *global* gradient, and Keras' TensorFlow
optimizer clips inside `apply()` before its own cross-replica sum, i.e. per replica. So the
optimizers made here skip that second sum (`_SummedByTrainStep`).

Example:
    >>> optimizer = create_optimizer("lamb", WarmupPolynomialDecay(1e-3, 1000, 100),
    ...                              model.trainable_variables)
"""

import re

import keras
import tensorflow as tf

from bert_tf.training.lamb import Lamb

OPTIMIZERS = ("adamw", "lamb")

# Google's run_pretraining.py excludes variables whose name has "LayerNorm", "layer_norm" or
# "bias" from weight decay; in this package's Keras paths, LayerNorms are "*layer_norm*".
_NO_WEIGHT_DECAY = re.compile(r"layer_norm|bias")

if not hasattr(keras.optimizers.Optimizer, "_all_reduce_sum_gradients"):
    raise ImportError(  # _SummedByTrainStep would silently stop working
        f"keras {keras.__version__}'s TensorFlow optimizer no longer has "
        f"`_all_reduce_sum_gradients`: update bert_tf/training/optimizers.py")


class FusedAdamW(keras.optimizers.AdamW):
    """AdamW (decoupled weight decay) with the Adam paper's epsilon, one fused kernel per variable.

    The epsilon is added to the *bias-corrected* `sqrt(v_hat)` (Algorithm 1 of Kingma & Ba; what
    PyTorch's and Hugging Face's AdamW and this package's `Lamb` do), not to the raw `sqrt(v)`
    as in Keras' `AdamW`. Keras' form makes the early steps' effective epsilon
    `epsilon / sqrt(1 - beta_2^t)`, 32x larger at step 1: with BERT's 1e-6 that is larger than
    the per-element gradients of the attention's query and key kernels at initialisation
    (~1e-5, the scores start uniform), so their updates are damped exactly when the model must
    learn where to attend. Measured on a copy task (bert_mini layers, lr 1e-3, 30 warmup steps,
    Hugging Face's initial weights): Keras' form was still at chance after 150 steps, this form
    and PyTorch's solved it by step ~125 along the same loss curve.

    Each update is `ResourceApplyAdam` (the variable and its two moments in one pass, where
    Keras' element-wise ops make six; bert_mini's update takes 24 ms instead of 44 on two CPU
    cores), given `epsilon * sqrt(1 - beta_2^t)` so that its `sqrt(v) + epsilon` equals the
    paper's. Weight decay and clipping stay Keras'.

    Example:
        >>> optimizer = FusedAdamW(learning_rate=1e-4, weight_decay=0.01, epsilon=1e-6)
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.amsgrad:
            raise ValueError("FusedAdamW has no amsgrad variant; use keras.optimizers.AdamW")

    def update_step(self, gradient, variable, learning_rate):
        index = self._get_variable_index(variable)
        dtype = variable.dtype
        step = tf.cast(self.iterations + 1, dtype)
        beta_1, beta_2 = tf.cast(self.beta_1, dtype), tf.cast(self.beta_2, dtype)
        beta_2_power = tf.pow(beta_2, step)
        tf.raw_ops.ResourceApplyAdam(
            var=variable.handle, m=_handle(self._momentums[index]),
            v=_handle(self._velocities[index]), beta1_power=tf.pow(beta_1, step),
            beta2_power=beta_2_power, lr=tf.cast(learning_rate, dtype), beta1=beta_1,
            beta2=beta_2, epsilon=tf.cast(self.epsilon, dtype) * tf.sqrt(1.0 - beta_2_power),
            grad=tf.cast(gradient, dtype))


def _handle(variable):
    """The resource handle of a Keras (or TensorFlow) variable."""
    return getattr(variable, "value", variable).handle


class _SummedByTrainStep:
    """Mixin: gradients arrive summed over replicas; do not sum them again."""

    def _all_reduce_sum_gradients(self, grads_and_vars):
        return grads_and_vars


class _AdamW(_SummedByTrainStep, FusedAdamW):
    pass


class _Lamb(_SummedByTrainStep, Lamb):
    pass


def create_optimizer(name, learning_rate, trainable_variables, weight_decay_rate=0.01,
                     clip_norm=1.0, loss_scaling=False, summed_by_train_step=True):
    """A built optimizer for `trainable_variables`.

    Args:
      name: "adamw" (Google's BERT optimizer, with the moments' bias correction of later BERT
        code and PyTorch: `FusedAdamW`) or "lamb" (`Lamb`, for large batches).
      learning_rate: a float or a schedule (`WarmupPolynomialDecay`).
      trainable_variables: the model's; those whose path has "layer_norm" or "bias" get no
        weight decay.
      weight_decay_rate: Google's 0.01.
      clip_norm: clip the global gradient norm to this (Google: 1.0); None or 0 disables.
      loss_scaling: wrap in `keras.optimizers.LossScaleOptimizer` (float16 training).
      summed_by_train_step: the caller's train step sums gradients over replicas itself (the
        pre-training trainer); False for `Model.fit`, where the optimizer sums them.
    """
    clipping = {"global_clipnorm": clip_norm} if clip_norm else {}
    adamw, lamb = (_AdamW, _Lamb) if summed_by_train_step else (FusedAdamW, Lamb)
    if name == "adamw":
        optimizer = adamw(learning_rate=learning_rate, weight_decay=weight_decay_rate,
                          beta_1=0.9, beta_2=0.999, epsilon=1e-6, name="adamw", **clipping)
    elif name == "lamb":
        optimizer = lamb(learning_rate=learning_rate, weight_decay_rate=weight_decay_rate,
                         beta_1=0.9, beta_2=0.999, epsilon=1e-6, name="lamb", **clipping)
    else:
        raise ValueError(f"Unknown optimizer {name!r}; choose one of {OPTIMIZERS}")
    optimizer.exclude_from_weight_decay(
        var_list=[v for v in trainable_variables if _NO_WEIGHT_DECAY.search(v.path)])
    if loss_scaling:
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    optimizer.build(trainable_variables)
    return optimizer
