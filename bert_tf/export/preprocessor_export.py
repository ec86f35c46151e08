"""Exports BERT's text preprocessing as a SavedModel that follows the TF Hub convention.

The SavedModel needs no Python code of this package to run: load it in a process that imports
only `tensorflow` and `tensorflow_text` (which registers the WordPiece op):

    >>> export_preprocessor("/tmp/bert_preprocess", "vocab.txt", do_lower_case=True)
    >>> preprocess = tf.saved_model.load("/tmp/bert_preprocess")
    >>> preprocess(tf.constant(["hello world"]))["input_word_ids"].shape      # seq_length 128
    TensorShape([1, 128])
    >>> tokens = preprocess.tokenize(tf.constant(["hello world"]))  # Ragged [1, words, pieces]
    >>> pairs = preprocess.bert_pack_inputs([tokens, tokens], seq_length=64)
    >>> preprocess.vocab_file.asset_path, preprocess.do_lower_case.numpy()

With `special_tokens_in_strings=True`, `[CLS]`, `[SEP]`, `[MASK]`, `[PAD]` and `[UNK]` written in
the text become their ids, as in Hugging Face (see `BertTokenizer`); the graph still uses only
core TensorFlow ops and tf.text's `FastWordpieceTokenizeWithOffsets`, which TF Serving 2.12
and later (linked with tensorflow-text 2.12.1) have.

Calling the model (and `serving_default`) cuts each text before tokenization to what
`seq_length` tokens can come from, as the task exports do (`text_inputs.cut_texts`), so a 10 MB
text costs what its first 64 KiB cost. `tokenize` returns every token of its texts (TF Hub's
convention: `bert_pack_inputs` may be given any `seq_length` later), so it keeps them whole.
"""


import tensorflow as tf

from bert_tf.export.export_arguments import check_seq_length
from bert_tf.export.serving_layout import make_world_readable
from bert_tf.export.text_inputs import cut_texts
from bert_tf.text.bert_packer import BertPacker
from bert_tf.text.bert_tokenizer import BertTokenizer

# bert_pack_inputs gets a concrete function for these segment counts and both token layouts
# ([batch, words, pieces] from tokenize, or [batch, pieces]), as TF Hub's preprocessors have.
_MAX_SEGMENTS = 3


class _Preprocessor(tf.Module):

    def __init__(self, vocab_file, do_lower_case, seq_length, truncation,
                 special_tokens_in_strings):
        super().__init__(name="bert_preprocess")
        self.tokenizer = BertTokenizer(vocab_file, do_lower_case, special_tokens_in_strings)
        self.packer = BertPacker.for_tokenizer(self.tokenizer, seq_length, truncation)
        # TF Hub's BERT models carry these two; consumers read them to build their tokenizer.
        self.vocab_file = tf.saved_model.Asset(vocab_file)
        self.do_lower_case = tf.Variable(bool(do_lower_case), trainable=False,
                                         name="do_lower_case")
        self.special_tokens_in_strings = tf.Variable(
            bool(special_tokens_in_strings), trainable=False, name="special_tokens_in_strings")

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def __call__(self, texts):
        texts = cut_texts(texts, self.packer.seq_length)
        return self.packer([self.tokenizer.tokenize_to_pieces(texts)])

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def tokenize(self, texts):
        return self.tokenizer.tokenize(texts)

    @tf.function
    def bert_pack_inputs(self, inputs, seq_length=None):
        # Without seq_length, the export's (TF Hub's preprocessors make it optional too).
        return self.packer(list(inputs), seq_length=seq_length)


def export_preprocessor(output_dir, vocab_file, do_lower_case, seq_length=128,
                        truncation="round_robin", special_tokens_in_strings=False):
    """Writes the preprocessing SavedModel for `vocab_file` to `output_dir`.

    The loaded object is callable on a string tensor `[batch]` (→ the three int32
    `[batch, seq_length]` inputs, single segment), has `tokenize(strings)` (→ int32 RaggedTensor
    `[batch, words, pieces]`) and `bert_pack_inputs(list_of_tokenized, seq_length=N)` for 1 to 3
    segments and any N (`seq_length` by default), the vocabulary as the asset `vocab_file`, and
    the variables `do_lower_case` and `special_tokens_in_strings`. The `serving_default`
    signature maps `text` to the three inputs. `seq_length` must pass `check_seq_length`: at least 3.
    """
    check_seq_length(seq_length)
    module = _Preprocessor(vocab_file, do_lower_case, seq_length, truncation,
                           special_tokens_in_strings)
    for ragged_rank in (1, 2):
        spec = tf.RaggedTensorSpec([None] * (ragged_rank + 1), tf.int32, ragged_rank=ragged_rank)
        for num_segments in range(1, _MAX_SEGMENTS + 1):
            module.bert_pack_inputs.get_concrete_function([spec] * num_segments)
            module.bert_pack_inputs.get_concrete_function(
                [spec] * num_segments, seq_length=tf.TensorSpec([], tf.int32))
    serving = tf.function(lambda text: module(text)).get_concrete_function(
        tf.TensorSpec([None], tf.string, name="text"))
    tf.saved_model.save(module, output_dir, signatures={"serving_default": serving})
    make_world_readable(output_dir)
