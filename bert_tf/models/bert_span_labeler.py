"""`BertSpanLabeler`: start/end logits over the tokens, for extractive question answering."""

import keras
import tensorflow as tf

from bert_tf.models.bert_task_model import BertTaskModel

# The logit given to padding positions. Far below any real logit, so argmax and n-best search
# never pick padding, and exp() of it underflows to exactly 0 in the softmax of the loss.
PADDING_LOGIT = -1e9


@keras.saving.register_keras_serializable(package="bert_tf")
class BertSpanLabeler(BertTaskModel):
    """The paper's SQuAD head: one dense layer maps each token's final hidden vector to a start
    and an end logit (the paper's start vector S and end vector E).

    Outputs `{"start_logits": [batch, seq], "end_logits": [batch, seq]}` in float32, with
    padding positions (`input_mask == 0`) set to `PADDING_LOGIT`. SQuAD v2.0's "no answer" is
    the span at `[CLS]` (position 0): its score is `start_logits[:, 0] + end_logits[:, 0]`, and
    training on unanswerable questions points both labels at 0. Train with the mean of the start
    and end sparse cross-entropies (`loss_weights` 0.5 each); turn logits into answer text with
    `bert_tf.metrics.squad_postprocess.decode_answer`.

    There is no dropout on the head: Google's `run_squad.py` has none.

    Args:
        encoder: a `BertEncoder`.
        initializer: the dense kernel's initializer; defaults to truncated normal with
            stddev `initializer_range`, as in BERT.
        preprocessor: optional Keras layer mapping raw (question, context) text to the
            encoder's input dict.

    Example:
        >>> labeler = BertSpanLabeler(BertEncoder(BertConfig.from_name("bert_tiny")))
        >>> sce = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        >>> labeler.compile(optimizer="adam", loss={"start_logits": sce, "end_logits": sce},
        ...                 loss_weights={"start_logits": 0.5, "end_logits": 0.5})
        >>> labeler.fit(inputs, {"start_logits": starts, "end_logits": ends})
    """

    def __init__(self, encoder, initializer=None, preprocessor=None, **kwargs):
        super().__init__(encoder, preprocessor, **kwargs)
        self.span_logits = self.head_dense(2, initializer, name="span_logits")

    def call(self, inputs, training=None):
        inputs = self.encoder_inputs(inputs)
        sequence = self.encoder(inputs, training=training)["sequence_output"]
        logits = self.span_logits(sequence)
        is_token = tf.not_equal(inputs["input_mask"], 0)
        start_logits, end_logits = tf.unstack(logits, axis=-1)
        return {"start_logits": tf.where(is_token, start_logits, PADDING_LOGIT),
                "end_logits": tf.where(is_token, end_logits, PADDING_LOGIT)}

    def get_config(self):
        config = super().get_config()
        config.update(initializer=keras.initializers.serialize(
            self.span_logits.kernel_initializer))
        return config
