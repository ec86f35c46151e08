"""`BertFeatureExtractor`: token features from several encoder layers (feature-based BERT)."""

import numbers

import keras
import tensorflow as tf

from bert_tf.layers.weighted_layer_sum import WeightedLayerSum
from bert_tf.models.bert_task_model import BertTaskModel

COMBINE_MODES = ("concat", "weighted_sum")


@keras.saving.register_keras_serializable(package="bert_tf")
class BertFeatureExtractor(BertTaskModel):
    """Contextual token features from chosen encoder layers, as in the paper's feature-based
    NER experiments (Table 7), where concatenating the last four layers came within 0.3 F1 of
    fine-tuning.

    `layer_indices` index the encoder's transformer layers Python-style (0 is the first layer,
    -1 the last). `combine="concat"` joins them on the hidden axis; `"weighted_sum"` mixes them
    with learned softmax weights (`WeightedLayerSum`). For the paper's setup, where BERT's
    parameters stay fixed, set `encoder.trainable = False` before training a model on top.

    Outputs `{"features": [batch, seq, hidden * len(layer_indices)]}` for concat, or
    `[batch, seq, hidden]` for weighted_sum, in float32.

    Example:
        >>> extractor = BertFeatureExtractor(BertEncoder(BertConfig.from_name("bert_base")))
        >>> extractor(inputs)["features"].shape       # the last four layers, concatenated
        TensorShape([batch, seq, 3072])
    """

    def __init__(self, encoder, layer_indices=(-4, -3, -2, -1), combine="concat",
                 preprocessor=None, **kwargs):
        super().__init__(encoder, preprocessor, **kwargs)
        num_layers = encoder.config.num_hidden_layers
        layer_indices = list(layer_indices)
        bad = [i for i in layer_indices if not isinstance(i, numbers.Integral)
               or isinstance(i, bool) or not -num_layers <= i < num_layers]
        if not layer_indices or bad:
            raise ValueError(f"BertFeatureExtractor: layer_indices must be a non-empty list of "
                             f"integers in [-{num_layers}, {num_layers - 1}] (the encoder has "
                             f"{num_layers} layers), got {layer_indices}")
        if combine not in COMBINE_MODES:
            raise ValueError(f"BertFeatureExtractor: combine must be one of {COMBINE_MODES}, "
                             f"got {combine!r}")
        self.layer_indices = [int(i) for i in layer_indices]  # NumPy integers too
        self.combine = combine
        if combine == "weighted_sum":
            self.layer_sum = WeightedLayerSum(len(layer_indices), dtype="float32", name="layer_sum")
            self.layer_sum.build((None, None, len(layer_indices), encoder.config.hidden_size))

    def call(self, inputs, training=None):
        layers = self.encoder(self.encoder_inputs(inputs), training=training)["encoder_outputs"]
        chosen = [layers[i] for i in self.layer_indices]
        if self.combine == "concat":
            return {"features": tf.concat(chosen, axis=-1)}
        return {"features": self.layer_sum(tf.stack(chosen, axis=-2))}

    def get_config(self):
        config = super().get_config()
        config.update(layer_indices=self.layer_indices, combine=self.combine)
        return config
