"""`BertMultipleChoice`: one score per candidate sequence (SWAG)."""

import keras
import tensorflow as tf

from bert_tf.models.bert_task_model import BertTaskModel


@keras.saving.register_keras_serializable(package="bert_tf")
class BertMultipleChoice(BertTaskModel):
    """The paper's SWAG head: each of the N choices is packed with the context as its own
    sequence, the encoder reads all `batch * N` sequences, and a vector dotted with each pooled
    `[CLS]` output gives the choice's score; a softmax over the N scores picks the answer.

    Inputs: the encoder's three keys as int32 `[batch, num_choices, seq]` tensors, or raw text
    when a `preprocessor` is given: string tensors `[batch, num_choices]` (or a tuple of them,
    e.g. `(contexts, endings)`, with the context repeated per choice); the preprocessor sees
    them flattened to `[batch * num_choices]`. `num_choices` may differ between batches.

    Outputs `{"logits": [batch, num_choices]}` in float32; train with
    `SparseCategoricalCrossentropy(from_logits=True)` on the index of the right choice.

    Args:
        encoder: a `BertEncoder`.
        dropout_rate: dropout on the pooled output; defaults to `hidden_dropout_prob`.
        initializer: the scoring vector's initializer; defaults to truncated normal with
            stddev `initializer_range`, as in BERT.
        preprocessor: optional Keras layer mapping raw text to the encoder's input dict.

    Example:
        >>> chooser = BertMultipleChoice(BertEncoder(BertConfig.from_name("bert_tiny")))
        >>> ids = tf.constant([[[101, 7, 102], [101, 8, 102]]])     # 1 question, 2 choices
        >>> chooser({"input_word_ids": ids, "input_mask": tf.ones_like(ids),
        ...          "input_type_ids": tf.zeros_like(ids)})["logits"].shape
        TensorShape([1, 2])
    """

    input_rank = 3  # [batch, num_choices, seq]

    def __init__(self, encoder, dropout_rate=None, initializer=None, preprocessor=None,
                 **kwargs):
        super().__init__(encoder, preprocessor, **kwargs)
        self.dropout = self.head_dropout(dropout_rate)
        self.scorer = self.head_dense(1, initializer, name="scorer")

    def call(self, inputs, training=None):
        inputs = self.encoder_inputs(inputs)
        num_choices = tf.shape(inputs["input_word_ids"])[1]
        # The encoder reads [batch * num_choices, seq]; rows of one example stay adjacent, so
        # the scores reshape straight back to [batch, num_choices].
        flat_inputs = {key: tf.reshape(value, [-1, tf.shape(value)[2]])
                       for key, value in inputs.items()}
        pooled = self.encoder(flat_inputs, training=training)["pooled_output"]
        scores = self.scorer(self.dropout(pooled, training=training))
        return {"logits": tf.reshape(scores, [-1, num_choices])}

    def preprocess(self, raw_inputs):
        self.check_segment_count(raw_inputs)
        raw_inputs = tf.nest.map_structure(tf.convert_to_tensor, raw_inputs)
        texts = tf.nest.flatten(raw_inputs)
        for text in texts:
            if text.shape.rank != 2:
                raise ValueError(f"BertMultipleChoice: raw text inputs must be "
                                 f"[batch, num_choices] string tensors, got shape "
                                 f"{tuple(text.shape)}")
        # The preprocessor packs one sequence per string: give it every choice of every example
        # as one flat batch, then restore [batch, num_choices, seq].
        packed = self.preprocessor(tf.nest.map_structure(lambda t: tf.reshape(t, [-1]), raw_inputs))
        choices_shape = tf.shape(texts[0])
        return {key: tf.reshape(value, tf.concat([choices_shape, tf.shape(value)[1:]], axis=0))
                for key, value in packed.items()}

    def get_config(self):
        config = super().get_config()
        config.update(dropout_rate=self.dropout.rate,
                      initializer=keras.initializers.serialize(self.scorer.kernel_initializer))
        return config
