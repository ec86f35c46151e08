"""WordPiece vocabularies: reading and writing (one token per line, the line number is the id)
and learning one from text."""

import collections
import os

import tensorflow as tf
from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib

from bert_tf.file_io import makedirs, open_file
from bert_tf.text.basic_tokenizer import BasicTokenizer

# The tokens BERT's inputs are built with; build_vocab puts them first, in this order, so that
# [PAD] is id 0 (padding must be id 0: input_mask and the embedding of padded positions rely on
# it in the original code).
RESERVED_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def load_vocab(path):
    """The tokens of the vocabulary file `path`, in id order.

    Like the original `load_vocab`, surrounding whitespace of each line is ignored. An empty
    file, empty lines and repeated tokens are errors: the original silently gives a repeated
    token the later id, which leaves an id that nothing maps to.

    Example:
        >>> load_vocab("vocab.txt")[:5]
        ['[PAD]', '[unused0]', '[unused1]', '[unused2]', '[unused3]']
    """
    try:
        with open_file(path, "rb") as f:  # local or remote (gs://...)
            text = f.read().decode("utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(f"Vocabulary file {path} is not valid UTF-8: {error}") from None
    # Only "\n" ends a line: str.splitlines() would also split at characters such as U+0085.
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    tokens, seen = [], {}
    for line_number, line in enumerate(lines, start=1):
        token = line.strip()
        if not token:
            raise ValueError(f"Vocabulary file {path}, line {line_number}: empty token.")
        if token in seen:
            raise ValueError(f"Vocabulary file {path}, line {line_number}: token {token!r} "
                             f"repeats line {seen[token]}.")
        seen[token] = line_number
        tokens.append(token)
    if not tokens:  # a tokenizer, an export or a run's copy of it would be of no use
        raise ValueError(f"Vocabulary file {path} is empty.")
    return tokens


def save_vocab(tokens, path):
    """Writes `tokens` to `path` (local or remote), one per line (UTF-8), creating its directory
    if needed."""
    if os.path.dirname(path):
        makedirs(os.path.dirname(path))
    with open_file(path, "wb") as f:  # bytes: "\n" line ends on every platform
        f.write("".join(token + "\n" for token in tokens).encode("utf-8"))


def count_words(lines, lower_case, batch_size=4096):
    """Counts BERT's words (after basic tokenization, in the graph) over an iterable of lines.

    `lines` may be `bytes` (invalid UTF-8 is tolerated: those bytes are dropped, as when reading
    with `errors="replace"`) or `str`. Lines are consumed in batches, so files of any size
    stream through in constant memory.

    Example:
        >>> count_words([b"Hello, hello!"], lower_case=True)
        Counter({'hello': 2, ',': 1, '!': 1})
    """
    splitter = BasicTokenizer(lower_case)
    split = tf.function(lambda texts: splitter.split(texts).flat_values,
                        input_signature=[tf.TensorSpec([None], tf.string)])
    counts = collections.Counter()
    for batch in _batches(lines, batch_size):
        counts.update(split(tf.constant(batch, tf.string)).numpy())
    return collections.Counter({word.decode("utf-8"): count for word, count in counts.items()})


def learn_vocab(word_counts, vocab_size, reserved_tokens=RESERVED_TOKENS, **learn_params):
    """Learns a WordPiece vocabulary of at most `vocab_size` tokens from `word_counts`.

    The size is a bound, not a target: tf.text binary-searches a count threshold and may stop
    below it, well below on a small corpus (6,393 tokens for 8,192 on the 4 MB Gutenberg
    sample), or above it (a config of `vocab_size` then cannot take the vocabulary), when the
    least frequent word pieces are dropped. Characters that need more room than `vocab_size`
    alone and as `##` continuations are a ValueError.

    Uses tf.text's implementation of the BERT vocabulary learner (the frequency-threshold
    algorithm of tensor2tensor, binary-searched to the target size): the reserved tokens first,
    then every kept character alone and as a `##` continuation, then the learned word pieces by
    frequency. `learn_params` go to `tensorflow_text`'s `learn` (`max_unique_chars`,
    `lower_thresh`, `num_iterations`, ...).
    """
    if vocab_size <= len(reserved_tokens):
        raise ValueError(f"vocab_size {vocab_size} leaves no room after the "
                         f"{len(reserved_tokens)} reserved tokens.")
    if not word_counts:
        raise ValueError("No words to learn a vocabulary from: the input text is empty.")
    vocab = wordpiece_tokenizer_learner_lib.learn(
        dict(word_counts), vocab_size=vocab_size, reserved_tokens=list(reserved_tokens),
        **learn_params)
    surplus = len(vocab) - vocab_size
    if surplus <= 0:
        return vocab
    # Every character alone and as a continuation, so that every word can be tokenized; the
    # rarest continuations come last, among the word pieces.
    needed = {token for token in vocab if len(token) == 1 or (
        token.startswith("##") and len(token) == 3)}.union(reserved_tokens)
    pieces = [token for token in vocab if token not in needed]
    if len(pieces) < surplus:
        characters = sum(len(token) == 1 for token in vocab)
        raise ValueError(f"vocab_size {vocab_size} is too small for the {characters:,} "
                         f"characters of the text: they need {len(needed):,} tokens with the "
                         f"reserved ones and the ## continuations; raise vocab_size or lower "
                         f"max_unique_chars")
    dropped = set(pieces[-surplus:])
    return [token for token in vocab if token not in dropped]


def _batches(lines, batch_size):
    batch = []
    for line in lines:
        batch.append(line)
        if len(batch) == batch_size:
            yield batch
            batch = []
    if batch:
        yield batch
