"""`WeightedLayerSum`: a learned softmax-weighted sum of several layers' outputs."""

import keras
import tensorflow as tf


@keras.saving.register_keras_serializable(package="bert_tf")
class WeightedLayerSum(keras.layers.Layer):
    """Sums `num_layers` stacked hidden states with learned weights `softmax(w)`.

    This is the "weighted sum" of hidden layers in the paper's feature-based experiments
    (Table 7), the scalar mix of ELMo. The weights start equal (w = 0), so an untrained layer
    returns the mean; the softmax keeps them positive and summing to one while training.

    Input `[..., num_layers, hidden]`, output `[..., hidden]`.

    Example:
        >>> layers = tf.stack(encoder_outputs[-4:], axis=-2)     # [batch, seq, 4, hidden]
        >>> WeightedLayerSum(num_layers=4)(layers).shape
        TensorShape([batch, seq, hidden])
    """

    def __init__(self, num_layers, **kwargs):
        super().__init__(**kwargs)
        if not isinstance(num_layers, int) or num_layers < 1:
            raise ValueError(f"WeightedLayerSum: num_layers must be a positive integer, "
                             f"got {num_layers!r}")
        self.num_layers = num_layers

    def build(self, input_shape):
        if input_shape[-2] is not None and input_shape[-2] != self.num_layers:
            raise ValueError(f"WeightedLayerSum: expected {self.num_layers} layers on axis -2, "
                             f"got input shape {tuple(input_shape)}")
        self.layer_weights = self.add_weight(name="layer_weights", shape=(self.num_layers,),
                                             initializer="zeros")
        self.built = True

    def call(self, stacked_layers):
        weights = tf.cast(tf.nn.softmax(self.layer_weights), stacked_layers.dtype)
        return tf.einsum("...lh,l->...h", stacked_layers, weights)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-2]) + (input_shape[-1],)

    def get_config(self):
        config = super().get_config()
        config.update(num_layers=self.num_layers)
        return config
