"""`BertPretrainer`: a `BertEncoder` with the paper's two pre-training heads."""

import keras

from bert_tf.config import BertConfig
from bert_tf.layers.masked_lm_head import MaskedLMHead
from bert_tf.layers.next_sentence_head import NextSentenceHead
from bert_tf.models.bert_encoder import INPUT_KEYS
from bert_tf.models.saved_model_export import SavedModelExport, input_specs

PRETRAINING_INPUT_KEYS = INPUT_KEYS + ("masked_lm_positions",)


@keras.saving.register_keras_serializable(package="bert_tf")
class BertPretrainer(SavedModelExport, keras.Model):
    """BERT's pre-training model: masked LM + next-sentence prediction over a shared encoder.

    Inputs: the encoder's dict (`input_word_ids`, `input_mask`, `input_type_ids`, int32
    `[batch, seq]`) plus `masked_lm_positions` (int32 `[batch, max_predictions_per_seq]`,
    padded with 0s whose `masked_lm_weights` are 0: those predictions are computed and then
    ignored by the loss, which keeps every shape static).

    Outputs: `mlm_logits [batch, max_predictions_per_seq, vocab]` and
    `next_sentence_logits [batch, 2]`, float32 (losses: `bert_tf.training.pretraining_objective`).

    The MLM decoder is the encoder's word-embedding table (tied), so this model adds only the
    heads' small weights: `masked_lm` (transform, LayerNorm, output bias) and `next_sentence`.
    Their names in Google's checkpoints: `bert_tf.checkpoints.pretraining_head_weights`; loading
    Google's, Hugging Face's or this package's checkpoint: `bert_tf.checkpoints.load_model`.

    Example:
        >>> pretrainer = BertPretrainer(BertEncoder(BertConfig.from_name("bert_tiny")))
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
            layer_norm_eps=config.layer_norm_eps,
            # The encoder's compute dtype (a functional Model's own policy stays float32).
            decoder_dtype=encoder.embeddings.compute_dtype,
            name="masked_lm")
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

    def export_input_signature(self):
        return [input_specs(PRETRAINING_INPUT_KEYS)]

    def get_config(self):
        return {"name": self.name, "trainable": self.trainable,
                "encoder": keras.saving.serialize_keras_object(self.encoder)}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["encoder"] = keras.saving.deserialize_keras_object(config["encoder"])
        return cls(**config)
