"""`BertClassifier`: sentence (pair) classification or regression on BERT's pooled output."""

import keras

from bert_tf.models.bert_task_model import BertTaskModel


@keras.saving.register_keras_serializable(package="bert_tf")
class BertClassifier(BertTaskModel):
    """The paper's sentence-level head: dropout and one dense layer on `pooled_output` (the
    tanh-pooled `[CLS]` vector), as Google's `run_classifier.py` does for GLUE.

    Outputs `{"logits": [batch, num_classes]}`, unnormalised float32 scores. With
    `num_classes=1` the single logit is a regression output (STS-B): train it with a mean
    squared error.

    Args:
        encoder: a `BertEncoder`, e.g. one loaded from a converted checkpoint.
        num_classes: number of labels (1 for regression).
        dropout_rate: dropout on the pooled output; defaults to `hidden_dropout_prob`.
        initializer: the dense kernel's initializer; defaults to truncated normal with
            stddev `initializer_range`, as in BERT.
        preprocessor: optional Keras layer mapping raw text to the encoder's input dict, so
            the model can be called on strings.

    Example:
        >>> encoder = BertEncoder(BertConfig.from_name("bert_tiny"))
        >>> classifier = BertClassifier(encoder, num_classes=2)
        >>> classifier.compile(optimizer=keras.optimizers.AdamW(2e-5),
        ...     loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        >>> classifier.fit(inputs, labels)   # inputs: the encoder's input dict
        >>> classifier(inputs)["logits"].shape
        TensorShape([batch, 2])
    """

    def __init__(self, encoder, num_classes, dropout_rate=None, initializer=None,
                 preprocessor=None, **kwargs):
        super().__init__(encoder, preprocessor, **kwargs)
        self.add_classification_head(num_classes, dropout_rate, initializer)

    def call(self, inputs, training=None):
        pooled = self.encoder(self.encoder_inputs(inputs), training=training)["pooled_output"]
        return {"logits": self.classifier(self.dropout(pooled, training=training))}

    def get_config(self):
        return {**super().get_config(), **self.classification_head_config()}
