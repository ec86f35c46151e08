"""`Lamb`: the layer-wise adaptive optimizer that pre-trains BERT with large batches."""

import keras
import tensorflow as tf
from keras import ops

from bert_tf.training.weight_decay import NoWeightDecayPattern


@keras.saving.register_keras_serializable(package="bert_tf")
class Lamb(NoWeightDecayPattern, keras.optimizers.Optimizer):
    """LAMB (You et al., 2019, "Large Batch Optimization for Deep Learning: Training BERT in
    76 minutes"), as used for BERT pre-training.

    Per variable `w` with gradient `g`, step `t`:

        m = beta_1 m + (1 - beta_1) g            v = beta_2 v + (1 - beta_2) g^2
        u = m / (1 - beta_1^t) / (sqrt(v / (1 - beta_2^t)) + epsilon) + weight_decay_rate w
        w = w - lr * (||w|| / ||u||) * u         (the trust ratio is 1 if either norm is 0)

    Unlike `keras.optimizers.Lamb`, the weight decay is part of `u`, so the trust ratio sees
    it (the paper's algorithm), and variables excluded from weight decay (`no_weight_decay`, a
    pattern of variable paths, or `exclude_from_weight_decay`; BERT excludes LayerNorm and
    biases) get neither decay nor the trust ratio: plain Adam steps, as in the paper's
    reference implementation.

    Example:
        >>> optimizer = Lamb(learning_rate=1e-3, weight_decay_rate=0.01,
        ...                  no_weight_decay=r"layer_norm|bias")
        >>> optimizer.apply(grads, model.trainable_variables)
    """

    def __init__(self, learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-6,
                 weight_decay_rate=0.01, name="lamb", **kwargs):
        if kwargs.get("weight_decay"):
            raise ValueError("Lamb: pass `weight_decay_rate` (applied inside the trust ratio), "
                             "not Keras' decoupled `weight_decay`")
        super().__init__(learning_rate=learning_rate, name=name, **kwargs)
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.epsilon = epsilon
        self.weight_decay_rate = weight_decay_rate

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        self._momentums, self._velocities = self.add_optimizer_variables(
            var_list, ["momentum", "velocity"])

    def apply(self, grads, trainable_variables=None):
        """Keras' `apply`, an embedding table's sparse gradient (`tf.IndexedSlices`) made dense
        first: LAMB moves every row anyway (the moments decay, the trust ratio needs the whole
        update's norm), and dense, with repeated rows summed, its global norm (clipping) and
        its update are those of the same gradient given dense."""
        grads = [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g
                 for g in grads]
        return super().apply(grads, trainable_variables)

    def update_step(self, gradient, variable, learning_rate):
        lr = ops.cast(learning_rate, variable.dtype)
        gradient = ops.cast(gradient, variable.dtype)
        step = ops.cast(self.iterations + 1, variable.dtype)
        m = self._momentums[self._get_variable_index(variable)]
        v = self._velocities[self._get_variable_index(variable)]
        self.assign(m, self.beta_1 * m + (1.0 - self.beta_1) * gradient)
        self.assign(v, self.beta_2 * v + (1.0 - self.beta_2) * ops.square(gradient))
        m_hat = m / (1.0 - ops.power(ops.cast(self.beta_1, variable.dtype), step))
        v_hat = v / (1.0 - ops.power(ops.cast(self.beta_2, variable.dtype), step))
        update = m_hat / (ops.sqrt(v_hat) + self.epsilon)
        if self._use_weight_decay(variable):
            update = update + self.weight_decay_rate * variable
            w_norm = ops.sqrt(ops.sum(ops.square(variable)))
            u_norm = ops.sqrt(ops.sum(ops.square(update)))
            ratio = ops.where((w_norm > 0) & (u_norm > 0), w_norm / ops.maximum(u_norm, 1e-30),
                              1.0)
            update = ratio * update
        self.assign_sub(variable, lr * update)

    def get_config(self):
        config = super().get_config()
        config.update(beta_1=self.beta_1, beta_2=self.beta_2, epsilon=self.epsilon,
                      weight_decay_rate=self.weight_decay_rate)
        return config
