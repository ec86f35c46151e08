"""`BertPreprocessor`: a Keras layer from raw strings to the encoder's input dict."""

import keras
import tensorflow as tf

from bert_tf.text.bert_packer import BertPacker
from bert_tf.text.bert_tokenizer import BertTokenizer


@keras.saving.register_keras_serializable(package="bert_tf")
class BertPreprocessor(keras.layers.Layer):
    """Tokenizes one text or a tuple of texts per example and packs them for `BertEncoder`.

    Call it on a string tensor `[batch]` (single segment) or on a tuple/list of string tensors
    (`(premises, hypotheses)`: pairs, or more segments); it returns the dict of int32
    `[batch, seq_length]` tensors `input_word_ids`, `input_mask`, `input_type_ids`. A scalar
    string gives `[seq_length]` tensors, which is what `tf.data` `map` sees before `batch`.
    Everything runs as TensorFlow ops, so the layer works inside a Keras model (on
    `keras.Input(shape=(), dtype="string")`), in `tf.data` and in exported SavedModels.

    Args:
        vocab: path of a `vocab.txt` or the list of tokens.
        lower_case: BERT's `do_lower_case`.
        seq_length: length of the packed inputs.
        truncation: "round_robin" (default) or "waterfall", see `BertPacker`.
        special_tokens_in_strings: `[CLS]`, `[SEP]`, `[MASK]`... written in the text become
            their ids, as in Hugging Face (see `BertTokenizer`); off by default, as in Google's.

    Example:
        >>> preprocessor = BertPreprocessor("vocab.txt", lower_case=True, seq_length=128)
        >>> text = keras.Input(shape=(), dtype="string")
        >>> encoder = BertEncoder(config)
        >>> model = keras.Model(text, encoder(preprocessor(text))["pooled_output"])
        >>> dataset = tf.data.Dataset.from_tensor_slices((premises, hypotheses)).batch(32)
        >>> dataset = dataset.map(lambda a, b: preprocessor((a, b)))
    """

    def __init__(self, vocab, lower_case, seq_length=128, truncation="round_robin",
                 special_tokens_in_strings=False, **kwargs):
        super().__init__(trainable=False, **kwargs)
        self.tokenizer = BertTokenizer(vocab, lower_case, special_tokens_in_strings)
        self.packer = BertPacker.for_tokenizer(self.tokenizer, seq_length, truncation)

    # Plain TensorFlow ops without tensor-dependent Python control flow: AutoGraph (tf.function,
    # tf.data) has nothing to convert, and converting this code would cost seconds per trace.
    @tf.autograph.experimental.do_not_convert
    def call(self, inputs):
        segments = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
        segments = [tf.convert_to_tensor(segment) for segment in segments]
        for index, segment in enumerate(segments):
            if segment.dtype != tf.string or segment.shape.rank not in (0, 1):
                raise ValueError(f"BertPreprocessor input {index} must be a string tensor of "
                                 f"shape [batch] or [], got {segment.dtype.name} "
                                 f"{segment.shape}.")
        ranks = {segment.shape.rank for segment in segments}
        if len(ranks) > 1:
            shapes = [tuple(segment.shape) for segment in segments]
            raise ValueError(f"BertPreprocessor inputs must all be [batch] or all be [] (one "
                             f"text each), got shapes {shapes}.")
        scalar = ranks == {0}
        if scalar:
            segments = [segment[tf.newaxis] for segment in segments]
        packed = self.packer([self.tokenizer.tokenize_to_pieces(segment) for segment in segments])
        if scalar:
            packed = {key: value[0] for key, value in packed.items()}
        return packed

    def get_config(self):
        config = super().get_config()
        config.pop("trainable", None)
        config.update(vocab=list(self.tokenizer.vocab), lower_case=self.tokenizer.lower_case,
                      seq_length=self.packer.seq_length, truncation=self.packer.truncation,
                      special_tokens_in_strings=self.tokenizer.special_tokens_in_strings)
        return config
