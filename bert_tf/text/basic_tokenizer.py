"""`BasicTokenizer`: BERT's text cleaning, normalisation and word splitting as TensorFlow ops."""

import numpy as np
import tensorflow as tf

from bert_tf.text.codepoint_table import BLOCK_SIZE, DROP, ISOLATED, SPACE, WORD, CodepointTable


def boolean_argument(value, name):
    """`value` if it is True or False (NumPy's too), else a ValueError naming `name`: `bool()`
    of the string "False", e.g. from a text config, is True.

    Example:
        >>> boolean_argument(np.True_, "lower_case")
        True
    """
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False, got {value!r}.")
    return bool(value)


class BasicTokenizer(tf.Module):
    """Splits raw UTF-8 strings into BERT's words, in the graph.

    Does what `BasicTokenizer` of the original `tokenization.py` does: drops NUL, U+FFFD and
    control characters, treats every Unicode space as a separator, makes each punctuation
    character and CJK ideograph a word of its own and, with `lower_case`, strips accents (NFD,
    then drops non-spacing marks) and lower-cases. Invalid UTF-8 bytes decode to U+FFFD and so
    disappear, exactly as when the text was read with `errors="replace"`.

    One known difference from the reference, in lower-case mode only: NFD sorts a run of
    combining marks by combining class, across characters; here each character is decomposed on
    its own, so two marks that lower-casing keeps (a few Mc and recent Mn marks, e.g. the
    musical-symbol stems U+1D165..U+1D172) stay in their input order. Marks it strips (Mn,
    all accents) are unaffected.

    Words come back as code points so that `BertTokenizer` can count characters (the 100-character
    limit) and map word-piece offsets back to the input; `split` gives them as strings.

    Example:
        >>> BasicTokenizer(lower_case=True).split(tf.constant(["Héllo, WORLD!"]))
        <tf.RaggedTensor [[b'hello', b',', b'world', b'!']]>
    """

    def __init__(self, lower_case, name=None):
        super().__init__(name=name)
        self.lower_case = boolean_argument(lower_case, "lower_case")
        table = CodepointTable(self.lower_case)
        self._block_index = tf.constant(table.block_index)
        self._blocks = tf.constant(table.blocks)
        # Only lower-casing changes characters; cased tokenization skips the expansion step.
        self._has_expansions = len(table.expansion_values) > 0
        if self._has_expansions:
            self._expansion_values = tf.constant(table.expansion_values)
            self._expansion_splits = tf.constant(table.expansion_splits)
            self._expansion_lengths = tf.constant(table.expansion_splits[1:]
                                                  - table.expansion_splits[:-1])

    # Plain TensorFlow ops without tensor-dependent Python control flow: AutoGraph (tf.function,
    # tf.data) has nothing to convert, and converting this code would cost seconds per trace.
    @tf.autograph.experimental.do_not_convert
    def split(self, texts):
        """Words of each text: a `RaggedTensor` of strings `[batch, words]` for `texts [batch]`."""
        words = self.split_to_codepoints(texts)
        return words.with_values(tf.strings.unicode_encode(words.values, "UTF-8"))

    @tf.autograph.experimental.do_not_convert
    def split_to_codepoints(self, texts):
        """The words of `texts [batch]` as code points: int32 `RaggedTensor [batch, words,
        chars]`."""
        words, _, _ = self._split(texts, with_offsets=False)
        return words

    @tf.autograph.experimental.do_not_convert
    def split_to_codepoints_with_offsets(self, texts):
        """Like `split_to_codepoints`, plus where each output character came from.

        Returns `(codepoints, starts, ends)`, all `[batch, words, chars]`: `starts`/`ends` are the
        int64 byte offsets in the input string of the character that produced each output
        character (lower-casing can turn one input character into several output characters;
        they share its offsets).
        """
        return self._split(texts, with_offsets=True)

    def _split(self, texts, with_offsets):
        texts = tf.convert_to_tensor(texts)
        if texts.dtype != tf.string or texts.shape.rank != 1:
            raise ValueError(f"BasicTokenizer takes a 1-D string tensor of texts, got "
                             f"{texts.dtype.name} with shape {texts.shape}.")
        if with_offsets:
            decoded, byte_starts = tf.strings.unicode_decode_with_offsets(
                texts, "UTF-8", errors="replace", replacement_char=0xFFFD)
            byte_starts = byte_starts.values
        else:
            decoded = tf.strings.unicode_decode(texts, "UTF-8", errors="replace",
                                                replacement_char=0xFFFD)
        codepoints = decoded.values
        text_of_char = decoded.value_rowids()

        codes = tf.gather(self._blocks,
                          tf.gather(self._block_index, codepoints // BLOCK_SIZE) * BLOCK_SIZE
                          + codepoints % BLOCK_SIZE)
        source, out_codepoints, out_classes = self._normalize(codepoints, codes)

        # A word starts at every isolated character (punctuation, CJK) and at the first word
        # character of a text or after a space or an isolated character.
        text_of_out = tf.gather(text_of_char, source)
        previous_class = tf.concat([[SPACE], out_classes[:-1]], axis=0)
        previous_text = tf.concat([[-1], text_of_out[:-1]], axis=0)
        starts_word = ((out_classes == ISOLATED) | (previous_class != WORD)
                       | (previous_text != text_of_out))
        in_word = tf.where(out_classes != SPACE)[:, 0]
        starts_word = tf.gather(starts_word, in_word)
        word_starts = tf.where(starts_word)[:, 0]
        word_splits = tf.concat([word_starts, tf.shape(in_word, tf.int64)], axis=0)
        text_of_word = tf.gather(tf.gather(text_of_out, in_word), word_starts)
        text_splits = tf.searchsorted(text_of_word, tf.range(tf.size(texts, tf.int64) + 1),
                                      side="left", out_type=tf.int64)

        def nest(values):
            words = tf.RaggedTensor.from_row_splits(values, word_splits, validate=False)
            return tf.RaggedTensor.from_row_splits(words, text_splits, validate=False)

        words = nest(tf.gather(out_codepoints, in_word))
        if not with_offsets:
            return words, None, None
        # A character ends where the next one of its text starts, or at the end of the text.
        next_text = tf.concat([text_of_char[1:], [-1]], axis=0)
        byte_ends = tf.where(next_text == text_of_char,
                             tf.concat([byte_starts[1:], [0]], axis=0),
                             tf.gather(tf.cast(tf.strings.length(texts), tf.int64), text_of_char))
        source_in_word = tf.gather(source, in_word)
        return (words, nest(tf.gather(byte_starts, source_in_word)),
                nest(tf.gather(byte_ends, source_in_word)))

    def _normalize(self, codepoints, codes):
        """Applies the table: returns, per output character, the index of the input character it
        came from, its code point and its class (never DROP)."""
        classes = codes % 4
        if not self._has_expansions:
            source = tf.where(classes != DROP)[:, 0]
            return source, tf.gather(codepoints, source), tf.gather(classes, source)
        rows = codes // 4
        num_outputs = tf.where(rows > 0, tf.gather(self._expansion_lengths, rows),
                               tf.cast(classes != DROP, tf.int32))
        source = tf.repeat(tf.range(tf.size(codepoints, tf.int64)), num_outputs)
        first_output = tf.cumsum(num_outputs, exclusive=True)
        position = tf.range(tf.size(source)) - tf.gather(first_output, source)
        source_rows = tf.gather(rows, source)
        expanded = tf.gather(self._expansion_values,
                             tf.gather(self._expansion_splits, source_rows) + position)
        unchanged = tf.gather(codepoints, source) * 4 + tf.gather(classes, source)
        packed = tf.where(source_rows > 0, expanded, unchanged)
        return source, packed // 4, packed % 4
