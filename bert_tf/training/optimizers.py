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


import keras
import tensorflow as tf

from bert_tf.training.lamb import Lamb
from bert_tf.training.optimizer_names import OPTIMIZERS
from bert_tf.training.weight_decay import NoWeightDecayPattern
from bert_tf.xla_host import host_jit_compile

# Google's run_pretraining.py excludes variables whose name has "LayerNorm", "layer_norm" or
# "bias" from weight decay; in this package's Keras paths, LayerNorms are "*layer_norm*".
_NO_WEIGHT_DECAY = r"layer_norm|bias"

if not hasattr(keras.optimizers.Optimizer, "_all_reduce_sum_gradients"):
    raise ImportError(  # _SummedByTrainStep would silently stop working
        f"keras {keras.__version__}'s TensorFlow optimizer no longer has "
        f"`_all_reduce_sum_gradients`: update bert_tf/training/optimizers.py")


@keras.saving.register_keras_serializable(package="bert_tf")
class FusedAdamW(NoWeightDecayPattern, keras.optimizers.AdamW):
    """AdamW (decoupled weight decay) with the Adam paper's epsilon, one fused loop per variable.

    The epsilon is added to the *bias-corrected* `sqrt(v_hat)` (Algorithm 1 of Kingma & Ba; what
    PyTorch's and Hugging Face's AdamW and this package's `Lamb` do), not to the raw `sqrt(v)`
    as in Keras' `AdamW`. Keras' form makes the early steps' effective epsilon
    `epsilon / sqrt(1 - beta_2^t)`, 32x larger at step 1: with BERT's 1e-6 that is larger than
    the per-element gradients of the attention's query and key kernels at initialisation
    (~1e-5, the scores start uniform), so their updates are damped exactly when the model must
    learn where to attend. Measured on a copy task (bert_mini layers, lr 1e-3, 30 warmup steps,
    Hugging Face's initial weights): Keras' form was still at chance after 150 steps, this form
    and PyTorch's solved it by step ~125 along the same loss curve.

    The update is memory-bound (a few flops per element of 4 arrays), so it is written to read
    and write each array once: per variable, one XLA-compiled loop applies the weight decay and
    both moments and moves the variable (`_adamw_update`; Keras' element-wise AdamW makes six
    passes, `ResourceApplyAdam` plus Keras' decay three more). Global-norm clipping sums each
    gradient's squares in one op (`tf.nn.l2_loss`, no squared copy), and an embedding table's
    sparse gradient (`tf.IndexedSlices`) is summed per distinct row and never made dense: its
    norm is its rows', and the update moves every row without a gradient, then writes the
    gradient's rows (`_adamw_rows_update`). MiniLM's 105 variables (22.7 M weights, half of
    them the word embeddings) on a 2-vCPU AMD EPYC (avx512_bf16, no AMX), idle: one `apply`
    39-42 -> 29-31 ms with the loops and the norm (`ResourceApplyAdam` alone, without decay or
    clipping, 16); on a 2-vCPU Xeon with AMX, idle, 40.1 -> 35.5 ms (median of 30) without the
    dense embedding gradient, against 26 ms for PyTorch's fused AdamW with its clipping (what
    Hugging Face's `Trainer` runs; `bench/optimizer_step.py`).
    The clipping's scale is applied in the same loop too, not as a multiply per gradient, where
    no sum over replicas follows the clipping (see `_backend_update_step`): the multiplies were
    16.6 of the 157 ms of op time in MiniLM's fine-tuning step at 32 x 16 tokens (bfloat16,
    2-vCPU Xeon with AMX).

    Example:
        >>> optimizer = FusedAdamW(learning_rate=1e-4, weight_decay=0.01, epsilon=1e-6)
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.amsgrad:
            raise ValueError("FusedAdamW has no amsgrad variant; use keras.optimizers.AdamW")

    # Set by `_SummedByTrainStep`: the gradients reaching `apply` are already summed over replicas.
    _gradients_arrive_summed = False

    def _clips_by_global_norm(self):
        return bool(self.global_clipnorm) and self.global_clipnorm > 0

    def _clips_in_update_step(self):
        """Whether the global-norm clipping is left to `_backend_update_step`: when nothing sums
        the gradients between the two (one replica, or summed before `apply`), so that the
        clipped gradient is the one each update reads."""
        return self._clips_by_global_norm() and (
            self._gradients_arrive_summed
            or self._distribution_strategy.num_replicas_in_sync == 1)

    def _clip_gradients(self, grads):
        if not self._clips_by_global_norm():
            return super()._clip_gradients(grads)
        grads = [_distinct_rows(g) if isinstance(g, tf.IndexedSlices) else g for g in grads]
        if self._clips_in_update_step():
            return grads
        # TensorFlow's clipping with our norm (sparse gradients scaled as rows).
        return tf.clip_by_global_norm(grads, self.global_clipnorm, use_norm=_global_norm(grads))[0]

    def _backend_update_step(self, grads, trainable_variables, learning_rate):
        """Keras' update of every variable, given the step's hyperparameters for `update_step`
        (`_step_hyperparameters`), with the global-norm clipping's scale (1 without clipping),
        which the update loop applies to each gradient as it reads it."""
        scale = (_clipping_scale(_global_norm(grads), self.global_clipnorm)
                 if self._clips_in_update_step() else tf.ones(()))
        super()._backend_update_step(grads, trainable_variables,
                                     self._step_hyperparameters(learning_rate, scale))

    def _step_hyperparameters(self, learning_rate, scale):
        """`(gradient_scale, learning_rate, decay, step, beta_1, beta_2, epsilon)` of this step
        as float32 scalars, `decay` the learning rate times the weight decay. Made once per step,
        not per variable: they were 11 of the 18 ops each variable's update traced (casts, the
        step's read of `iterations`), and MiniLM's fine-tuning step in batch halves went from
        9,487 to 8,568 ops, each ~0.9 ms to trace (2-vCPU Intel Xeon with AMX)."""
        learning_rate = tf.cast(learning_rate, tf.float32)
        return (tf.cast(scale, tf.float32), learning_rate,
                learning_rate * tf.cast(self.weight_decay, tf.float32),
                tf.cast(self.iterations + 1, tf.float32),
                *(tf.constant(value, tf.float32)
                  for value in (self.beta_1, self.beta_2, self.epsilon)))

    def _apply_weight_decay(self, variables):
        """Applied in `update_step`, in the same pass as the update (Keras' order: the decay
        first, `w -= lr * weight_decay * w`, then the Adam step)."""

    def update_step(self, gradient, variable, step_hyperparameters):
        """`step_hyperparameters`: `_step_hyperparameters`' (`_backend_update_step`)."""
        index = self._get_variable_index(variable)
        dtype = variable.dtype
        # (A cast to the dtype a tensor already has is no op.)
        scale, learning_rate, decay, *adam = [tf.cast(value, dtype)
                                              for value in step_hyperparameters]
        if not self._use_weight_decay(variable):
            decay = tf.zeros((), dtype)
        handles = (_handle(variable), _handle(self._momentums[index]),
                   _handle(self._velocities[index]))
        hyperparameters = (scale, learning_rate, decay, *adam)
        if isinstance(gradient, tf.IndexedSlices):
            # Adam moves every row, but only the gradient's rows need reading: see
            # `_adamw_rows_update`. Distinct rows again: a sum over replicas concatenates them.
            gradient = _distinct_rows(gradient)
            _adamw_rows_update(*handles, gradient.indices, tf.cast(gradient.values, dtype),
                               *hyperparameters)
        else:
            _adamw_update(*handles, tf.cast(gradient, dtype), *hyperparameters)


def _adamw_step(w, m, v, gradient, learning_rate, decay, step, beta_1, beta_2, epsilon):
    """`(w, m, v)` after one AdamW step with `gradient`: the decay `w *= 1 - decay`, then Adam's
    step with epsilon on the bias-corrected sqrt(v_hat).

    The bias corrections are scalars folded into the step size and into a factor on sqrt(v)
    (as PyTorch's AdamW folds them, though it divides by that factor's inverse where this
    multiplies), leaving one division per element instead of three
    (`m / c1`, `v / c2`, the step): XLA's CPU loops are bound by those divisions, not by
    memory. The word-embedding table's zero-gradient step (`[30522, 384]`, one thread, 2-vCPU
    AMD EPYC family 26, idle, median of 40, six runs each): 9.1-9.7 -> 7.5-7.8 ms (reading
    and writing the three arrays alone: 4.9-5.0 ms). The same values up to float32 rounding."""
    m_new = m + (gradient - m) * (1 - beta_1)
    v_new = v + (gradient * gradient - v) * (1 - beta_2)
    step_size = learning_rate / (1 - tf.pow(beta_1, step))
    sqrt_v_correction = tf.math.rsqrt(1 - tf.pow(beta_2, step))  # sqrt(v_hat) = sqrt(v) * this
    return (w * (1 - decay) - step_size * m_new / (tf.sqrt(v_new) * sqrt_v_correction + epsilon),
            m_new, v_new)


def _read(handles, dtype):
    return [tf.raw_ops.ReadVariableOp(resource=handle, dtype=dtype) for handle in handles]


def _assign(handles, values):
    for handle, value in zip(handles, values):
        tf.raw_ops.AssignVariableOp(resource=handle, value=value)


@tf.function(jit_compile=host_jit_compile(), autograph=False)
def _adamw_update(variable, m, v, gradient, gradient_scale, *hyperparameters):
    """One AdamW step (`_adamw_step`) on the variables behind the resource handles `variable`,
    `m`, `v` with the gradient `gradient * gradient_scale`, in one pass over the four arrays."""
    handles = (variable, m, v)
    _assign(handles, _adamw_step(*_read(handles, gradient.dtype), gradient * gradient_scale,
                                 *hyperparameters))


def _adamw_rows_update(variable, m, v, rows, row_gradients, gradient_scale, *hyperparameters):
    """`_adamw_update` for a gradient that is zero outside `rows` (distinct), given as those
    rows' values: the gradient's rows are read, every row takes the step with a zero gradient
    (`_adamw_decay`), then the gradient's rows are overwritten with their step computed from
    the values read before. The result is the dense update's, without the dense gradient ever
    being written or read: on MiniLM's word embeddings (`[30522, 384]`, ~470 rows per
    fine-tuning batch) that was 47 MB written by `UnsortedSegmentSum` and read again by the
    update, of the ~330 MB the update moves. That table's update alone: 14.3 -> 10.0 ms (2-vCPU
    Xeon with AMX, idle, median of 20); as one XLA loop ending in a scatter, 27.6 ms.
    """
    handles = (variable, m, v)
    old_rows = [tf.raw_ops.ResourceGather(resource=handle, indices=rows, dtype=row_gradients.dtype)
                for handle in handles]
    # Needing no gradient, the decay could run at any time in the step; it waits for the
    # gradient's rows, the end of the backward pass, and so runs on one core while the other
    # updates the ~100 other variables. One XLA call that holds a core for its whole run (~7 ms
    # on MiniLM's table), it stalled one chain of the forward and backward pass in between:
    # MiniLM's fine-tuning step (bfloat16, one intra-op thread, both forms in one process taking
    # turns, 10-12 rounds of 6 steps; 2-vCPU AMD EPYC family 26) at 32 x 8 / 12 / 16 / 24 /
    # 32 / 48 tokens 10 / 6 / 4-6 / 0-2 / 4 / 4 % faster than with the decay started after the
    # forward pass's weight casts, as before (which had been 4-5 % faster than at the start).
    with tf.control_dependencies([row_gradients]):
        _adamw_decay(*handles, *hyperparameters)
    new_rows = _adamw_step(*old_rows, row_gradients * gradient_scale, *hyperparameters)
    for handle, values in zip(handles, new_rows):
        tf.raw_ops.ResourceScatterUpdate(resource=handle, indices=rows, updates=values)


@tf.function(jit_compile=host_jit_compile(), autograph=False)
def _adamw_decay(variable, m, v, learning_rate, *hyperparameters):
    """`_adamw_update` with a zero gradient: what Adam does to the rows a batch did not touch."""
    handles = (variable, m, v)
    dtype = learning_rate.dtype  # the variable's (`update_step` casts to it)
    _assign(handles, _adamw_step(*_read(handles, dtype), tf.zeros((), dtype), learning_rate,
                                 *hyperparameters))


def _global_norm(grads):
    """The global norm of `grads`, one op per gradient (`IndexedSlices` holding each row once,
    see `_distinct_rows`)."""
    return tf.sqrt(tf.add_n([2 * tf.nn.l2_loss(_values(g)) for g in grads if g is not None]))


def _clipping_scale(norm, clip_norm):
    """What `tf.clip_by_global_norm` multiplies every gradient by, with Keras' rule: NaN when
    the norm is not finite."""
    scale = clip_norm * tf.minimum(1.0 / norm, 1.0 / clip_norm)
    return tf.where(tf.math.is_finite(norm), scale, float("nan"))


def _distinct_rows(gradient):
    """`gradient` (IndexedSlices) with each row index once, its rows summed: the squares of
    its values then sum to the squared norm of the dense gradient."""
    rows, position = tf.unique(gradient.indices)
    return tf.IndexedSlices(tf.math.unsorted_segment_sum(gradient.values, position,
                                                         tf.size(rows)),
                            rows, gradient.dense_shape)


def _handle(variable):
    """The resource handle of a Keras (or TensorFlow) variable."""
    return (variable.value if isinstance(variable, keras.Variable) else variable).handle


def _values(gradient):
    return gradient.values if isinstance(gradient, tf.IndexedSlices) else gradient


class _SummedByTrainStep:
    """Mixin: gradients arrive summed over replicas; do not sum them again."""

    _gradients_arrive_summed = True

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
                          beta_1=0.9, beta_2=0.999, epsilon=1e-6, name="adamw",
                          no_weight_decay=_NO_WEIGHT_DECAY, **clipping)
    elif name == "lamb":
        optimizer = lamb(learning_rate=learning_rate, weight_decay_rate=weight_decay_rate,
                         beta_1=0.9, beta_2=0.999, epsilon=1e-6, name="lamb",
                         no_weight_decay=_NO_WEIGHT_DECAY, **clipping)
    else:
        raise ValueError(f"Unknown optimizer {name!r}; choose one of {OPTIMIZERS}")
    if loss_scaling:
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    optimizer.build(trainable_variables)
    return optimizer
