"""`BertPretrainer`: a `BertEncoder` with the paper's two pre-training heads."""

import logging

import keras

from bert_tf.checkpoints import assign_weights, encoder_weights, read_weights
from bert_tf.config import BertConfig
from bert_tf.layers.masked_lm_head import MaskedLMHead
from bert_tf.layers.next_sentence_head import NextSentenceHead
from bert_tf.models.bert_encoder import INPUT_KEYS

logger = logging.getLogger("bert_tf.models")

PRETRAINING_INPUT_KEYS = INPUT_KEYS + ("masked_lm_positions",)

# Each head weight and its name in Google's checkpoints (same layout, no transposes).
_HEAD_WEIGHTS = (
    ("cls/predictions/transform/dense/kernel", "masked_lm", "transform.kernel"),
    ("cls/predictions/transform/dense/bias", "masked_lm", "transform.bias"),
    ("cls/predictions/transform/LayerNorm/gamma", "masked_lm", "transform_layer_norm.gamma"),
    ("cls/predictions/transform/LayerNorm/beta", "masked_lm", "transform_layer_norm.beta"),
    ("cls/predictions/output_bias", "masked_lm", "output_bias"),
    ("cls/seq_relationship/output_weights", "next_sentence", "output_weights"),
    ("cls/seq_relationship/output_bias", "next_sentence", "output_bias"),
)


@keras.saving.register_keras_serializable(package="bert_tf")
class BertPretrainer(keras.Model):
    """BERT's pre-training model: masked LM + next-sentence prediction over a shared encoder.

    Inputs: the encoder's dict (`input_word_ids`, `input_mask`, `input_type_ids`, int32
    `[batch, seq]`) plus `masked_lm_positions` (int32 `[batch, max_predictions_per_seq]`,
    padded with 0s whose `masked_lm_weights` are 0: those predictions are computed and then
    ignored by the loss, which keeps every shape static).

    Outputs: `mlm_logits [batch, max_predictions_per_seq, vocab]` and
    `next_sentence_logits [batch, 2]`, float32 (losses: `bert_tf.training.pretraining_objective`).

    The MLM decoder is the encoder's word-embedding table (tied), so this model adds only the
    heads' small weights: `masked_lm` (transform, LayerNorm, output bias) and `next_sentence`.
    Google names of those weights: `head_weights()`.

    Example:
        >>> pretrainer = BertPretrainer(BertEncoder(BertConfig.from_name("bert_tiny")))
        >>> pretrainer.load_checkpoint("uncased_L-2_H-128_A-2/bert_model.ckpt")  # bert/ + cls/
        >>> outputs = pretrainer({**encoder_inputs, "masked_lm_positions": positions})
        >>> outputs["mlm_logits"].shape
        TensorShape([batch, 20, 30522])
    """

    def __init__(self, encoder, **kwargs):
        super().__init__(**kwargs)
        if not (isinstance(encoder, keras.layers.Layer)
                and isinstance(getattr(encoder, "config", None), BertConfig)):
            raise TypeError(f"BertPretrainer: `encoder` must be a bert_tf.BertEncoder, got "
                            f"{type(encoder).__name__}")
        config = encoder.config
        self.encoder = encoder
        self.masked_lm = MaskedLMHead(
            vocab_size=config.vocab_size, hidden_size=config.hidden_size,
            activation=config.hidden_act, initializer_range=config.initializer_range,
            layer_norm_eps=config.layer_norm_eps, name="masked_lm")
        self.masked_lm.build()
        self.next_sentence = NextSentenceHead(
            hidden_size=config.hidden_size, initializer_range=config.initializer_range,
            name="next_sentence")
        self.next_sentence.build()
        self.built = True

    def call(self, inputs, training=None):
        missing = [key for key in PRETRAINING_INPUT_KEYS if key not in inputs]
        if missing:
            raise ValueError(f"BertPretrainer inputs lack {missing}; it takes a dict with the "
                             f"keys {list(PRETRAINING_INPUT_KEYS)}")
        outputs = self.encoder({key: inputs[key] for key in INPUT_KEYS}, training=training)
        return {
            "mlm_logits": self.masked_lm(outputs["sequence_output"],
                                         inputs["masked_lm_positions"],
                                         self.encoder.embeddings.word_embeddings),
            "next_sentence_logits": self.next_sentence(outputs["pooled_output"]),
        }

    def head_weights(self):
        """`[(google_name, variable)]` for every weight of the two heads."""
        pairs = []
        for google_name, head, path in _HEAD_WEIGHTS:
            variable = getattr(self, head)
            for attribute in path.split("."):
                variable = getattr(variable, attribute)
            pairs.append((google_name, variable))
        return pairs

    def load_checkpoint(self, path, require_heads=False):
        """Loads the encoder and, when the checkpoint has them, the heads' `cls/...` weights.

        `path` is anything `bert_tf.checkpoints.read_weights` reads: a Google TF1 checkpoint,
        a Hugging Face `BertForPreTraining` safetensors file, or this package's checkpoint.
        Every encoder weight must be there. The heads are all-or-nothing: a checkpoint with
        none (e.g. a bare `BertModel`) leaves them freshly initialised, logged, unless
        `require_heads`; one with only some of them is an error.

        Returns the Google names of the head weights loaded (empty when none were).
        Raises `bert_tf.checkpoints.CheckpointMismatchError` naming every missing or
        mis-shaped weight; the model is then unchanged.
        """
        weights = read_weights(path, config=self.encoder.config)
        heads = [(variable, name) for name, variable in self.head_weights()]
        load_heads = require_heads or any(name in weights.arrays for _, name in heads)
        pairs = [(variable, name) for name, variable in encoder_weights(self.encoder)]
        # One all-or-nothing assignment: a bad checkpoint leaves the whole model unchanged.
        assign_weights(pairs + (heads if load_heads else []), weights.arrays,
                       source=weights.source)
        if not load_heads:
            logger.warning("%s has no pre-training heads (cls/...): they keep their random "
                           "initialisation", weights.source)
            return []
        return [name for _, name in heads]

    def get_config(self):
        return {"name": self.name, "trainable": self.trainable,
                "encoder": keras.saving.serialize_keras_object(self.encoder)}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["encoder"] = keras.saving.deserialize_keras_object(config["encoder"])
        return cls(**config)
