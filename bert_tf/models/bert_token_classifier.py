"""`BertTokenClassifier`: one label per token (named-entity recognition, tagging)."""

import keras

from bert_tf.models.bert_task_model import BertTaskModel


@keras.saving.register_keras_serializable(package="bert_tf")
class BertTokenClassifier(BertTaskModel):
    """The paper's tagging head (CoNLL-2003 NER): dropout and one dense layer on every token's
    final hidden vector.

    Outputs `{"logits": [batch, seq, num_classes]}` in float32. Padding and the non-first
    WordPieces of a word carry no label in the paper's setup: leave them out of the loss, e.g.
    with `SparseCategoricalCrossentropy(from_logits=True, ignore_class=-1)` and label -1 there,
    or with `sample_weight`. Score predictions at the entity level with
    `bert_tf.metrics.sequence_labeling.entity_scores`.

    Args:
        encoder: a `BertEncoder`.
        num_classes: number of tags.
        dropout_rate: dropout on the sequence output; defaults to `hidden_dropout_prob`.
        initializer: the dense kernel's initializer; defaults to truncated normal with
            stddev `initializer_range`, as in BERT.
        preprocessor: optional Keras layer mapping raw text to the encoder's input dict.

    Example:
        >>> tagger = BertTokenClassifier(BertEncoder(BertConfig.from_name("bert_tiny")),
        ...                              num_classes=9)
        >>> tagger(inputs)["logits"].shape   # inputs: the encoder's input dict, [batch, seq]
        TensorShape([batch, seq, 9])
    """

    def __init__(self, encoder, num_classes, dropout_rate=None, initializer=None,
                 preprocessor=None, **kwargs):
        super().__init__(encoder, preprocessor, **kwargs)
        self.add_classification_head(num_classes, dropout_rate, initializer)

    def call(self, inputs, training=None):
        sequence = self.encoder(self.encoder_inputs(inputs), training=training)["sequence_output"]
        return {"logits": self.classifier(self.dropout(sequence, training=training))}

    def get_config(self):
        return {**super().get_config(), **self.classification_head_config()}
