"""`BertTokenizer`: raw strings to BERT word-piece ids, in the TensorFlow graph."""

import collections.abc
import functools
import os

import tensorflow as tf
import tensorflow_text as tf_text

from bert_tf.text.basic_tokenizer import BasicTokenizer, boolean_argument
from bert_tf.text.special_tokens import cut_at_special_tokens
from bert_tf.text.vocab import load_vocab

# The original WordpieceTokenizer gives up on words longer than this many characters
# (code points after normalisation, not bytes) and emits a single [UNK].
MAX_CHARS_PER_WORD = 100
SUFFIX_INDICATOR = "##"
UNKNOWN_TOKEN = "[UNK]"
# The special tokens Hugging Face's BertWordPieceTokenizer finds in text (those the vocabulary has).
SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
# Printable ASCII plus the three whitespace controls. On such text BERT's normalisation is only
# ASCII lower-casing and whitespace/punctuation splitting, which tf.text's end-to-end WordPiece
# does in one C++ pass with exactly BERT's rules (ASCII punctuation 33-47, 58-64, 91-96, 123-126;
# a byte is a character, so its byte limit is the character limit). Everything else takes the
# exact, table-driven path through BasicTokenizer.
_PLAIN_ASCII_TEXT = r"[\t\n\r -~]*"


class BertTokenizer(tf.Module):
    """BERT's `FullTokenizer` (basic tokenization + greedy longest-match-first WordPiece) as ops.

    Works on a 1-D string tensor in eager code, `tf.data`, `tf.function`, Keras models and
    SavedModels alike. The ids equal those of Google's `FullTokenizer` and of Hugging Face
    `BertWordPieceTokenizer` for any input, including invalid UTF-8 (those bytes are dropped, as
    when the text is read with `errors="replace"`).

    `[CLS]`, `[SEP]` or `[MASK]` written in the text are ordinary text by default, as for
    Google's tokenizer. With `special_tokens_in_strings=True` they, `[PAD]` and `[UNK]` become
    their ids wherever they are written exactly so (also inside words, `a[CLS]b`; `[cls]` stays
    text even when lower-casing), as Hugging Face's `BertWordPieceTokenizer` does.

    Args:
        vocab: path (`str` or `pathlib.Path`) of a `vocab.txt` or the list of tokens (the
            index is the id).
        lower_case: BERT's `do_lower_case`: strip accents and lower-case before WordPiece.
        special_tokens_in_strings: treat special tokens written in the text as such.

    Example:
        >>> tokenizer = BertTokenizer("vocab.txt", lower_case=True)
        >>> ids = tokenizer.tokenize(tf.constant(["Hello, unaffable world!"]))
        >>> ids                                # [batch, words, word pieces]
        <tf.RaggedTensor [[[7592], [1010], [14477, 20961, 3468], [2088], [999]]]>
        >>> tokenizer.detokenize(ids)
        <tf.Tensor: ... numpy=array([b'hello , unaffable world !'], dtype=object)>
    """

    def __init__(self, vocab, lower_case, special_tokens_in_strings=False, name=None):
        super().__init__(name=name)
        if isinstance(vocab, collections.abc.Mapping):
            # Iterating it would number the tokens in the dict's order, not by its ids.
            raise ValueError("vocab must be a path or the list of tokens in id order, got a "
                             "dict; pass sorted(vocab, key=vocab.get).")
        vocab = (load_vocab(os.fspath(vocab)) if isinstance(vocab, (str, os.PathLike))
                 else [str(t) for t in vocab])
        # Plain Python data, set past tf.Module's attribute tracking: assigned normally, the token
        # list and the token -> id dict are wrapped and tracked element by element, 0.37-0.75 s
        # for MiniLM's 30,522 tokens against 4-9 ms (5 fresh processes each, 2-vCPU Intel
        # Xeon with AMX). Neither is saved: SavedModels hold the vocabulary in their graphs,
        # `.keras` files in `get_config`.
        object.__setattr__(self, "vocab", vocab)
        object.__setattr__(self, "_ids", {token: index for index, token in enumerate(vocab)})
        self.lower_case = boolean_argument(lower_case, "lower_case")
        self.special_tokens_in_strings = boolean_argument(special_tokens_in_strings,
                                                          "special_tokens_in_strings")
        self.unknown_id = self.token_id(UNKNOWN_TOKEN)
        self._special_ids = {token: self._ids[token] for token in SPECIAL_TOKENS
                             if token in self._ids}
        self.basic_tokenizer = BasicTokenizer(self.lower_case)
        # Words are split already (no_pretokenization). A word of at most 100 characters has at
        # most 400 UTF-8 bytes; longer words are turned into [UNK] here, by character count.
        self._wordpiece = tf_text.FastWordpieceTokenizer(
            vocab=self.vocab, suffix_indicator=SUFFIX_INDICATOR,
            max_bytes_per_word=4 * MAX_CHARS_PER_WORD, token_out_type=tf.int32,
            unknown_token=UNKNOWN_TOKEN, no_pretokenization=True)
        self._ascii_wordpiece = tf_text.FastWordpieceTokenizer(
            vocab=self.vocab, suffix_indicator=SUFFIX_INDICATOR,
            max_bytes_per_word=MAX_CHARS_PER_WORD, token_out_type=tf.int32,
            unknown_token=UNKNOWN_TOKEN, no_pretokenization=False)
        self._vocab_strings = tf.constant(self.vocab)
        # The end-to-end WordPiece returns a flat list of pieces; a word starts at every piece
        # that is not a "##" continuation ([UNK] replaces a whole word, so it starts one too).
        self._is_continuation = tf.constant(
            [token.startswith(SUFFIX_INDICATOR) for token in self.vocab])
        # Each kind of tokenization is a function of its own, traced once for batches of any
        # size. In tf.data this pays: the ops of a map function itself cost about twice as much
        # per call as the same ops in a function it calls (about 20% of BertPreprocessor's CPU
        # time on the Gutenberg lines). Set past tf.Module's attribute tracking: a
        # SavedModel that tokenizes holds these functions in its graphs, it needs no copies.
        object.__setattr__(self, "_tokenize_functions", {
            (with_offsets, by_word): tf.function(
                functools.partial(self._tokenize_graph, with_offsets=with_offsets,
                                  by_word=by_word),
                input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
            for with_offsets, by_word in ((False, True), (True, True), (False, False))})

    def token_id(self, token):
        """The id of `token`; a clear error if the vocabulary lacks it."""
        if token not in self._ids:
            raise ValueError(f"The vocabulary ({len(self.vocab)} tokens) has no {token!r} token.")
        return self._ids[token]

    # Plain TensorFlow ops without tensor-dependent Python control flow: AutoGraph (tf.function,
    # tf.data) has nothing to convert, and converting this code would cost seconds per trace.
    @tf.autograph.experimental.do_not_convert
    def tokenize(self, texts):
        """Word-piece ids of `texts [batch]`: int32 `RaggedTensor [batch, words, word pieces]`."""
        ids, = self._tokenize(texts, with_offsets=False, by_word=True)
        return ids

    @tf.autograph.experimental.do_not_convert
    def tokenize_with_offsets(self, texts):
        """`(ids, starts, ends)`, all `[batch, words, word pieces]`.

        `starts`/`ends` are int64 byte offsets into each input string: the piece covers
        `text[start:end]` (the characters that produced it, including accents that lower-casing
        removed). This is what SQuAD answer spans and NER labels are mapped with.
        """
        return self._tokenize(texts, with_offsets=True, by_word=True)

    @tf.autograph.experimental.do_not_convert
    def tokenize_to_pieces(self, texts):
        """The ids of `tokenize(texts).merge_dims(1, 2)`, int32 `RaggedTensor [batch, pieces]`,
        without building the word level (faster): for all that needs only the pieces of each
        text, e.g. packing (`BertPreprocessor`) and masking."""
        ids, = self._tokenize(texts, with_offsets=False, by_word=False)
        return ids

    @tf.autograph.experimental.do_not_convert
    def detokenize(self, ids):
        """Text of `ids` (`[batch, words, pieces]` or `[batch, tokens]`, ragged or dense): pieces
        joined into words at `##`, words separated by one space; [CLS], [SEP] and [PAD] left out
        so that packed `input_word_ids` read back too. Returns a string tensor `[batch]`."""
        if not isinstance(ids, tf.RaggedTensor):
            ids = tf.RaggedTensor.from_tensor(tf.convert_to_tensor(ids))
        ids = tf.cast(ids, tf.int32)
        if ids.shape.rank == 3:
            ids = ids.merge_dims(1, 2)
        if ids.shape.rank != 2:
            raise ValueError(f"detokenize takes ids of shape [batch, words, pieces] or "
                             f"[batch, tokens], got shape {ids.shape}.")
        structural = [self._ids[t] for t in ("[CLS]", "[SEP]", "[PAD]") if t in self._ids]
        keep = tf.reduce_all(tf.not_equal(ids.values[:, None], structural), axis=1)
        ids = tf.ragged.boolean_mask(ids, ids.with_values(keep))
        text = tf.strings.reduce_join(tf.gather(self._vocab_strings, ids), axis=-1, separator=" ")
        return tf.strings.regex_replace(text, " " + SUFFIX_INDICATOR, "")

    def _tokenize(self, texts, with_offsets, by_word):
        """A tuple of ids (and, `with_offsets`, starts and ends), `[batch, words, pieces]` if
        `by_word` else `[batch, pieces]`."""
        texts = tf.convert_to_tensor(texts)
        if texts.dtype != tf.string or texts.shape.rank != 1:
            raise ValueError(f"BertTokenizer takes a 1-D string tensor of texts, got "
                             f"{texts.dtype.name} with shape {texts.shape}.")
        return self._tokenize_functions[with_offsets, by_word](texts)

    def _tokenize_graph(self, texts, with_offsets, by_word):
        if not self.special_tokens_in_strings:
            return self._tokenize_text(texts, with_offsets, by_word)
        # The text between special tokens is tokenized on its own, as Hugging Face does. The
        # cutting and joining cost about 45 % more time per batch (Gutenberg lines in batches
        # of 4096: 25 instead of 36 MB/s, tokenize_to_pieces, 2 shared cores).
        cut = cut_at_special_tokens(texts, self._special_ids)
        return cut.join(self._tokenize_text(cut.segments, with_offsets, by_word))

    def _tokenize_text(self, texts, with_offsets, by_word):
        is_ascii = tf.strings.regex_full_match(texts, _PLAIN_ASCII_TEXT)

        def plain_ascii():
            return self._tokenize_ascii(texts, with_offsets, by_word)

        def mixed():
            ascii_index = tf.where(is_ascii)[:, 0]
            other_index = tf.where(~is_ascii)[:, 0]
            ascii_results = self._tokenize_ascii(tf.gather(texts, ascii_index), with_offsets,
                                                 by_word)
            other_results = self._tokenize_general(tf.gather(texts, other_index), with_offsets,
                                                   by_word)
            # Put the texts back in their order.
            order = tf.math.invert_permutation(tf.concat([ascii_index, other_index], axis=0))
            return tuple(tf.gather(tf.concat([a, b], axis=0), order)
                         for a, b in zip(ascii_results, other_results))

        # Most batches of real text are all plain ASCII: they skip the table path and the
        # reordering (in a graph, only the branch taken runs).
        return tf.cond(tf.reduce_all(is_ascii), plain_ascii, mixed)

    def _tokenize_ascii(self, texts, with_offsets, by_word):
        if self.lower_case:
            texts = tf.strings.lower(texts)  # ASCII only: byte offsets stay valid
        if with_offsets:
            pieces, starts, ends = self._ascii_wordpiece.tokenize_with_offsets(texts)
            results = (pieces, starts.with_values(tf.cast(starts.values, tf.int64)),
                       ends.with_values(tf.cast(ends.values, tf.int64)))
        else:
            results = (self._ascii_wordpiece.tokenize(texts),)
        if not by_word:
            return results
        pieces = results[0]
        starts_word = ~tf.gather(self._is_continuation, pieces.values)
        word_splits = tf.concat([tf.where(starts_word)[:, 0], [tf.size(pieces.values, tf.int64)]],
                                axis=0)
        # Words per text: count word starts before each text's first piece.
        text_splits = tf.searchsorted(word_splits, pieces.row_splits, side="left",
                                      out_type=tf.int64)
        return tuple(tf.RaggedTensor.from_nested_row_splits(
            result.values, [text_splits, word_splits], validate=False) for result in results)

    def _tokenize_general(self, texts, with_offsets, by_word):
        if with_offsets:
            words, char_starts, char_ends = (
                self.basic_tokenizer.split_to_codepoints_with_offsets(texts))
        else:
            words = self.basic_tokenizer.split_to_codepoints(texts)
        word_chars = words.values                       # [all words, chars]
        word_strings = tf.strings.unicode_encode(word_chars, "UTF-8")
        if with_offsets:
            pieces, piece_starts, piece_ends = self._wordpiece.tokenize_with_offsets(word_strings)
        else:
            pieces = self._wordpiece.tokenize(word_strings)

        too_long = word_chars.row_lengths() > MAX_CHARS_PER_WORD
        # A word of more than 100 characters (but at most 400 bytes) may have been split into
        # pieces: it becomes one [UNK] instead, as in the original.
        word_of_piece = pieces.value_rowids()
        piece_too_long = tf.gather(too_long, word_of_piece)
        first_piece = tf.range(tf.size(word_of_piece, tf.int64)) == tf.gather(
            pieces.row_splits, word_of_piece)
        keep = tf.where(~piece_too_long | first_piece)[:, 0]
        piece_splits = tf.concat([[0], tf.cumsum(tf.where(too_long, tf.constant(1, tf.int64),
                                                          pieces.row_lengths()))], axis=0)
        ids = tf.where(piece_too_long, self.unknown_id, pieces.values)

        if not by_word:
            # The pieces of a text are those of its words.
            piece_splits = tf.gather(piece_splits, words.row_splits)

        def nest(values):
            split = tf.RaggedTensor.from_row_splits(tf.gather(values, keep), piece_splits,
                                                    validate=False)
            return words.with_values(split) if by_word else split

        if not with_offsets:
            return (nest(ids),)
        # Pieces are located in the normalised word; map their byte positions back to the input
        # through the output character they start (end) in.
        char_lengths = _utf8_length(word_chars.values)
        char_positions = tf.cumsum(char_lengths, exclusive=True)   # over all words, in order
        word_positions = tf.gather(char_positions, word_chars.row_starts())
        piece_word_position = tf.gather(word_positions, word_of_piece)
        word_bytes = tf.reduce_sum(word_chars.with_values(char_lengths), axis=1)
        piece_end_global = piece_word_position + tf.where(
            piece_too_long, tf.gather(word_bytes, word_of_piece), piece_ends.values)
        first_char = tf.searchsorted(char_positions, piece_word_position + piece_starts.values,
                                     side="right", out_type=tf.int64) - 1
        last_char = tf.searchsorted(char_positions, piece_end_global - 1,
                                    side="right", out_type=tf.int64) - 1
        return (nest(ids), nest(tf.gather(char_starts.flat_values, first_char)),
                nest(tf.gather(char_ends.flat_values, last_char)))


def _utf8_length(codepoints):
    """Bytes of each code point in UTF-8."""
    codepoints = tf.cast(codepoints, tf.int64)
    return (1 + tf.cast(codepoints >= 0x80, tf.int64) + tf.cast(codepoints >= 0x800, tf.int64)
            + tf.cast(codepoints >= 0x10000, tf.int64))

