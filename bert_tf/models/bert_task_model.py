"""`BertTaskModel`: what every fine-tuning model over a `BertEncoder` shares."""

import numbers

import keras
import tensorflow as tf

from bert_tf.config import BertConfig
from bert_tf.layers.dropout import BertDropout
from bert_tf.layers.initializers import truncated_normal
from bert_tf.models.batch_halves import in_batch_halves
from bert_tf.models.bert_encoder import INPUT_KEYS
from bert_tf.models.saved_model_export import SavedModelExport, input_specs
from bert_tf.thread_pools import ops_side_by_side_on_cores


@keras.saving.register_keras_serializable(package="bert_tf")
class BertTaskModel(SavedModelExport, keras.Model):
    """Base of the task models (`BertClassifier`, `BertSpanLabeler`, ...).

    It holds the user's `encoder` (its variables are shared, not copied: fine-tuning the task
    model fine-tunes that encoder) and an optional `preprocessor`, any Keras layer that maps raw
    text to the encoder's input dict. Calling the model with that dict runs the encoder directly;
    calling it with anything else (e.g. `tf.constant(["a text"])`) goes through the preprocessor
    first. Both are nested in the model's config, so `.keras` files restore them.

    Subclasses build their head layers in `__init__` (`head_dense` and `add_classification_head`
    do), where every shape is known from `encoder.config`: the model is then complete without a
    sample call, and `.keras` loading finds all its variables.

    Example:
        >>> class Pooled(BertTaskModel):
        ...     def call(self, inputs, training=None):
        ...         return self.encoder(self.encoder_inputs(inputs), training=training)
        >>> Pooled(BertEncoder(BertConfig.from_name("bert_tiny")))
    """

    # Rank of each tensor of the encoder's input dict the model takes: [batch, seq].
    input_rank = 2

    def __init__(self, encoder, preprocessor=None, **kwargs):
        super().__init__(**kwargs)
        if not (isinstance(encoder, keras.layers.Layer)
                and isinstance(getattr(encoder, "config", None), BertConfig)):
            raise TypeError(f"{type(self).__name__}: `encoder` must be a bert_tf.BertEncoder (a "
                            f"Keras layer with a BertConfig `config`), got "
                            f"{type(encoder).__name__}")
        if preprocessor is not None and not isinstance(preprocessor, keras.layers.Layer):
            raise TypeError(f"{type(self).__name__}: `preprocessor` must be a Keras layer mapping "
                            f"raw text to the encoder's input dict, got "
                            f"{type(preprocessor).__name__}")
        self.encoder = encoder
        self.preprocessor = preprocessor
        self._forward_in_batch_halves = False
        # The encoder is built and subclasses build their layers as they create them, so Keras
        # must not try to build the model from a sample input (it cannot guess raw-text inputs).
        self.built = True

    def train_step(self, data):
        """Keras' train step; when the ops run one thread each on several CPU cores
        (`ops_side_by_side_on_cores`), its forward pass (and so its backward pass) runs as two
        independent passes over the halves of the batch, one per core (`in_batch_halves`). The
        loss, metrics and gradients are those of the whole batch; only the dropout masks are
        drawn per half, so a run resumes exactly only with the same thread settings."""
        if not ops_side_by_side_on_cores():
            return super().train_step(data)
        self._forward_in_batch_halves = True
        try:
            return super().train_step(data)
        finally:
            self._forward_in_batch_halves = False

    def __call__(self, inputs, *args, **kwargs):
        """Keras' call; inside `train_step` in batch halves, one call per half."""
        if not self._forward_in_batch_halves:
            return super().__call__(inputs, *args, **kwargs)
        call = super().__call__
        return in_batch_halves(lambda half: call(half, *args, **kwargs), inputs)

    def head_dropout(self, dropout_rate):
        """Dropout before a head's dense layer; the rate defaults to the encoder's
        `hidden_dropout_prob`, what BERT's fine-tuning used."""
        if dropout_rate is None:
            dropout_rate = self.encoder.config.hidden_dropout_prob
        return BertDropout(dropout_rate, dtype="float32", name="head_dropout")

    def head_dense(self, units, initializer, name):
        """A float32 Dense layer over the encoder's hidden vectors, built now.

        `initializer` defaults to BERT's own: truncated normal with the encoder config's
        `initializer_range`. Heads compute in float32 under any dtype policy: they are a tiny
        share of the FLOPs, and their logits feed softmax and the loss, which need the range.
        """
        if initializer is None:
            initializer = truncated_normal(self.encoder.config.initializer_range)
        dense = keras.layers.Dense(units, kernel_initializer=keras.initializers.get(initializer),
                                   dtype="float32", name=name)
        dense.build((None, self.encoder.config.hidden_size))
        return dense

    def add_classification_head(self, num_classes, dropout_rate, initializer):
        """Dropout and a dense layer of `num_classes` outputs, as `self.dropout` and
        `self.classifier`, the head of `BertClassifier` (pooled output) and
        `BertTokenClassifier` (every token). The attribute names are the checkpoints' variable
        names (`model/classifier/kernel`...), which `bert_tf.checkpoints.load_model` reads the
        number of classes from."""
        # Any integer type: `labels.max() + 1` is a NumPy integer.
        if (not isinstance(num_classes, numbers.Integral) or isinstance(num_classes, bool)
                or num_classes < 1):
            raise ValueError(f"{type(self).__name__}: num_classes must be a positive integer, "
                             f"got {num_classes!r}")
        self.num_classes = int(num_classes)
        self.dropout = self.head_dropout(dropout_rate)
        self.classifier = self.head_dense(self.num_classes, initializer, name="classifier")

    def classification_head_config(self):
        """The `add_classification_head` arguments, for `get_config`."""
        return {"num_classes": self.num_classes, "dropout_rate": self.dropout.rate,
                "initializer": keras.initializers.serialize(self.classifier.kernel_initializer)}

    def encoder_inputs(self, inputs):
        """The encoder's input dict: `inputs` itself (each tensor of rank `input_rank`), or the
        preprocessor's output for raw text."""
        if isinstance(inputs, dict) and set(inputs) == set(INPUT_KEYS):
            for key, value in inputs.items():
                if tf.TensorShape(value.shape).rank not in (None, self.input_rank):
                    raise ValueError(
                        f"{type(self).__name__}: input '{key}' must have rank "
                        f"{self.input_rank}, got shape {tuple(value.shape)}")
            return inputs
        if self.preprocessor is None:
            got = (f"a dict with keys {sorted(inputs)}" if isinstance(inputs, dict)
                   else type(inputs).__name__)
            raise ValueError(
                f"{type(self).__name__} takes a dict with exactly the keys {list(INPUT_KEYS)}, got "
                f"{got}; to call it on raw text, build it with a `preprocessor`.")
        return self.preprocess(inputs)

    def export_input_signature(self):
        """The encoder's input dict of int32 tensors of rank `input_rank`; with a preprocessor,
        there is no default: `export` needs the raw text's."""
        if self.preprocessor is not None:
            raise ValueError(f"{type(self).__name__}.export: pass input_signature= for the "
                             f"raw text the preprocessor takes, e.g. "
                             f"[tf.TensorSpec([None], tf.string)]")
        return [input_specs(INPUT_KEYS, self.input_rank)]

    def preprocess(self, raw_inputs):
        """Runs the preprocessor on raw text. Subclasses whose inputs have more dimensions than
        `[batch]` (multiple choice) reshape around it."""
        self.check_segment_count(raw_inputs)
        return self.preprocessor(raw_inputs)

    def check_segment_count(self, raw_inputs):
        """Raises a ValueError when `raw_inputs` has more text segments than the encoder has
        token types: segment i is packed with `input_type_ids` i, and the graph would fail with
        "indices[0,5] = 2 is not in [0, 2)", naming neither."""
        segments = len(tf.nest.flatten(raw_inputs))
        type_vocab_size = self.encoder.config.type_vocab_size
        if segments > type_vocab_size:
            raise ValueError(f"{type(self).__name__}: {segments} text segments need "
                             f"input_type_ids 0 to {segments - 1}, but the encoder's "
                             f"type_vocab_size is {type_vocab_size}: pass at most "
                             f"{type_vocab_size} segments")

    def get_config(self):
        return {"name": self.name, "trainable": self.trainable,
                "encoder": keras.saving.serialize_keras_object(self.encoder),
                "preprocessor": (None if self.preprocessor is None
                                 else keras.saving.serialize_keras_object(self.preprocessor))}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["encoder"] = keras.saving.deserialize_keras_object(config["encoder"])
        if config.get("preprocessor") is not None:
            config["preprocessor"] = keras.saving.deserialize_keras_object(config["preprocessor"])
        # Set once the head exists: a constructor argument reaches no layer made after it.
        trainable = config.pop("trainable", True)
        model = cls(**config)
        model.trainable = trainable
        return model
