"""In-graph BERT text preprocessing with tensorflow-text: raw strings to the encoder's inputs.

    BasicTokenizer      clean-up, normalisation, CJK/punctuation word splitting (code point tables)
    BertTokenizer       + greedy longest-match-first WordPiece: ids equal Google's FullTokenizer /
                        Hugging Face BertWordPieceTokenizer; tokenize, tokenize_with_offsets,
                        detokenize
    BertPacker          [CLS] A [SEP] B [SEP] ..., round_robin or waterfall truncation, padding
    BertPreprocessor    Keras layer: strings (or tuples of strings) -> encoder input dict
    load_vocab, save_vocab, count_words, learn_vocab: vocabularies (tools/build_vocab.py)
The preprocessing SavedModel is `bert_tf.export.export_preprocessor`.
"""

from bert_tf.text.basic_tokenizer import BasicTokenizer
from bert_tf.text.bert_packer import BertPacker
from bert_tf.text.bert_preprocessor import BertPreprocessor
from bert_tf.text.bert_tokenizer import BertTokenizer
from bert_tf.text.vocab import RESERVED_TOKENS, count_words, learn_vocab, load_vocab, save_vocab

__all__ = ["BasicTokenizer", "BertPacker", "BertPreprocessor", "BertTokenizer", "RESERVED_TOKENS",
           "count_words", "learn_vocab", "load_vocab", "save_vocab"]
