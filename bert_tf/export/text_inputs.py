"""`RawTextPacker`: raw strings to encoder inputs, plus where each packed token came from.

Serving models answer in terms of the client's text: a tagger labels spans of the input, a
SQuAD model returns a piece of the context. So besides the encoder's three inputs, this packs
each token's byte offsets in its input string and whether it starts a word, aligned position by
position with `input_word_ids` (the same `BertPacker` trimming and layout, with -1 at `[CLS]`,
`[SEP]` and padding).

Each text is cut to its first `MAX_BYTES_PER_TOKEN * seq_length` bytes before tokenization, so
that the memory a request takes is bounded by `seq_length`, not by the size of its texts (a
10 MB text costs what its first 64 KiB cost at seq_length 128). Outputs are unchanged for every
text of at most that many bytes, and for longer ones whenever the tokens that fit in
`seq_length` come from that prefix, which only runs of whitespace or control characters, or
words of over 512 bytes (each a single [UNK]), averaging more than 512 bytes per token could
prevent. Offsets still index the client's text: the kept part is a prefix. `cut_texts` is
that rule for any pipeline that reads a known number of tokens (the preprocess export uses it;
`pack_windows`, SQuAD's windows over a context, cuts the context to the tokens of
`max_windows` windows: 2,301 at seq_length 384, doc_stride 128 and 16 windows, 1.2 MB).

`RawTextPacker.trim` then drops the padding columns no row of the batch needs: a batch is
packed to its longest row, rounded up to a multiple of `pad_to_multiple_of`, at most
`seq_length`. The encoder masks padding out of attention, so the kept positions get the
outputs they get at full length (within float round-off).

Example:
    >>> packer = RawTextPacker("vocab.txt", do_lower_case=True, seq_length=8)
    >>> inputs, tokens = packer.pack_with_offsets([tf.constant(["Hello unaffable"])])
    >>> tokens["start_offset"]       # [CLS] hello un ##aff ##able [SEP] pad pad
    <tf.Tensor: numpy=array([[-1, 0, 6, 8, 11, -1, -1, -1]], dtype=int32)>
    >>> tokens["first_subword"]
    <tf.Tensor: numpy=array([[False, True, True, False, False, False, False, False]])>
"""

import tensorflow as tf

from bert_tf.data.tasks.squad_windows import SPECIAL_TOKENS, context_windows, max_context_mask
from bert_tf.text.bert_packer import BertPacker
from bert_tf.text.bert_tokenizer import BertTokenizer

# Marks [CLS], [SEP] and padding in the aligned per-token outputs.
NOT_A_TOKEN = -1
# Bytes of text kept per packed token: a word-piece comes from a word of at most 100 characters
# (at most 400 UTF-8 bytes; longer words are one [UNK]), leaving over 100 bytes for the spaces
# and punctuation around it. A multi-byte character cut in two at the end is invalid UTF-8,
# which the tokenizer drops.
MAX_BYTES_PER_TOKEN = 512
# Batches are trimmed to a multiple of this many columns. Measured on the MiniLM classifier,
# SST-2 dev sentences at batch 1 (docs/performance_serving.md): p50 20.9 ms at 1 (exact length),
# 20.3 ms at 8, 22.2 ms at 16: distinct shapes cost nothing measurable, extra columns do; 8
# bounds the shapes a server sees to seq_length / 8 per batch size.
DEFAULT_PAD_TO_MULTIPLE_OF = 8


def cut_texts(texts, num_tokens):
    """`texts` (strings `[batch]`) cut to the `MAX_BYTES_PER_TOKEN * num_tokens` bytes that
    the first `num_tokens` tokens of each can come from (e.g. `seq_length` packed tokens).

    Example:
        >>> cut_texts(tf.constant(["x" * 5000]), num_tokens=8)   # 512 bytes per token
        <tf.Tensor: ... numpy=array([b'xxxx...x'], dtype=object)>  # 4096 of them
    """
    return tf.strings.substr(texts, 0, MAX_BYTES_PER_TOKEN * num_tokens)


class RawTextPacker:
    """Tokenizes and packs 1..N string segments `[batch]` to `seq_length` (round-robin
    truncation, as `BertPreprocessor`).

    Args:
        vocab_file: the `vocab.txt`.
        do_lower_case: BERT's `do_lower_case`.
        seq_length: length of the packed inputs (and the most `trim` keeps).
        pad_to_multiple_of: `trimmed_length` rounds a batch's longest row up to a multiple of
            this; `seq_length` keeps every batch at full length.
    """

    def __init__(self, vocab_file, do_lower_case, seq_length,
                 pad_to_multiple_of=DEFAULT_PAD_TO_MULTIPLE_OF):
        if pad_to_multiple_of < 1:
            raise ValueError(f"pad_to_multiple_of must be at least 1, got {pad_to_multiple_of}.")
        self.pad_to_multiple_of = int(pad_to_multiple_of)
        self.tokenizer = BertTokenizer(vocab_file, do_lower_case)
        self.packer = BertPacker.for_tokenizer(self.tokenizer, seq_length)
        # Trimming depends only on segment lengths, so packing per-piece values with the same
        # packer settings puts each value at its token's position.
        self._aligned_packer = BertPacker(seq_length, start_id=NOT_A_TOKEN, end_id=NOT_A_TOKEN,
                                          pad_id=NOT_A_TOKEN)

    @property
    def seq_length(self):
        return self.packer.seq_length

    def cut(self, segment):
        """`segment` (strings `[batch]`) cut to what `seq_length` tokens can come from."""
        return cut_texts(segment, self.seq_length)

    def trimmed_length(self, inputs):
        """The columns the packed batch `inputs` needs: its longest row (`input_mask`) rounded
        up to a multiple of `pad_to_multiple_of`, at most `seq_length` (a scalar int32)."""
        mask = inputs["input_mask"]
        # An empty batch has no longest row; 1 keeps the shapes valid ([0, multiple]).
        longest = tf.reduce_max(tf.concat([[1], tf.reduce_sum(mask, axis=-1)], axis=0))
        multiple = self.pad_to_multiple_of
        return tf.minimum((longest + multiple - 1) // multiple * multiple, self.seq_length)

    def trim(self, inputs, length):
        """Each `[batch, seq_length]` tensor of the dict `inputs` cut to its first `length`
        columns (from `trimmed_length`); other dims before the last are kept."""
        return {name: value[..., :length] for name, value in inputs.items()}

    def pack(self, segments):
        """The encoder's input dict for a list of string tensors `[batch]`."""
        return self.packer([self.tokenizer.tokenize_to_pieces(self.cut(segment))
                            for segment in segments])

    def pack_with_offsets(self, segments):
        """`(inputs, tokens)`: the encoder's input dict, and `tokens` with int32 `[batch, seq]`
        `start_offset` / `end_offset` (the token covers `segment[start:end]`, in bytes, of the
        segment that `input_type_ids` names) and bool `first_subword` (the token starts a word)."""
        ids, starts, ends, firsts = [], [], [], []
        for segment in segments:
            segment_ids, segment_starts, segment_ends = self.tokenizer.tokenize_with_offsets(
                self.cut(segment))
            pieces = segment_ids.values                     # [words, pieces]
            position_in_word = (tf.range(tf.size(pieces.values, tf.int64))
                                - tf.gather(pieces.row_starts(), pieces.value_rowids()))
            ids.append(segment_ids)
            starts.append(segment_starts)
            ends.append(segment_ends)
            firsts.append(segment_ids.with_flat_values(tf.cast(position_in_word == 0, tf.int32)))
        tokens = {name: self._aligned_packer(values)["input_word_ids"]
                  for name, values in (("start_offset", starts), ("end_offset", ends),
                                       ("first_subword", firsts))}
        tokens["first_subword"] = tokens["first_subword"] == 1
        return self.packer(ids), tokens

    def pack_windows(self, question, context, max_query_length, doc_stride, max_windows):
        """`(inputs, tokens, window_starts)`: `[CLS] question [SEP] window [SEP]` for each window
        over each context, as run_squad packs them (`bert_tf.data.tasks.squad.squad_features`);
        the rows are the windows of all examples, in order.

        `question` and `context` are strings `[batch]`. The question keeps its first
        `max_query_length` word pieces; each window holds the `seq_length - 3 - question pieces`
        context tokens that follow its start, windows start `doc_stride` tokens apart, and a
        context has at most `max_windows` of them (`squad_windows.context_windows`): it is cut
        before tokenization to the bytes they can read.

        Returns:
            inputs: the encoder's input dict, `[rows, seq_length]`.
            tokens: int32 `start_offset` / `end_offset` `[rows, seq_length]`, the bytes of the
                context each token covers (`NOT_A_TOKEN` outside the window's context tokens),
                and bool `max_context`, where the window owns the token
                (`squad_windows.max_context_mask`).
            window_starts: int64 `RaggedTensor [batch, (windows)]`, the first context token of
                each row's window: its row partition maps rows to examples.

        Example:
            >>> inputs, tokens, window_starts = packer.pack_windows(    # seq_length 384
            ...     tf.constant(["Who?"]), tf.constant([text_of_600_tokens]), 64, 128, 16)
            >>> window_starts
            <tf.RaggedTensor [[0, 128, 256]]>
        """
        queries = self.tokenizer.tokenize_to_pieces(cut_texts(question, max_query_length))
        queries = queries[:, :max_query_length]
        # Windows are longest next to an empty question.
        longest_window = self.seq_length - SPECIAL_TOKENS
        read = (max_windows - 1) * min(doc_stride, longest_window) + longest_window
        ids, starts, ends = (pieces.merge_dims(1, 2) for pieces in
                             self.tokenizer.tokenize_with_offsets(cut_texts(context, read)))
        window_starts, window_lengths = context_windows(
            ids.row_lengths(), longest_window - queries.row_lengths(), doc_stride, max_windows)
        owned = max_context_mask(window_starts, window_lengths).values
        example = window_starts.value_rowids()
        row_queries = tf.gather(queries, example)
        # Each window's tokens, as indices into the batch's context tokens.
        first_token = tf.gather(ids.row_starts(), example) + window_starts.values
        window_tokens = tf.ragged.range(first_token, first_token + window_lengths.values)

        # The question's positions get NOT_A_TOKEN, as [CLS], [SEP] and padding do.
        in_question = row_queries.with_values(tf.fill(tf.shape(row_queries.values), NOT_A_TOKEN))

        def pack_aligned(window_values):
            """`window_values` (`[rows, (window tokens)]`) at their tokens' positions."""
            return self._aligned_packer([in_question, window_values])["input_word_ids"]

        tokens = {name: pack_aligned(tf.gather(values.values, window_tokens))
                  for name, values in (("start_offset", starts), ("end_offset", ends))}
        tokens["max_context"] = pack_aligned(tf.cast(owned, tf.int32)) == 1
        inputs = self.packer([row_queries, tf.gather(ids.values, window_tokens)])
        return inputs, tokens, window_starts
