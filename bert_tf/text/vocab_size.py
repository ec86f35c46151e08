"""Does a model config's `vocab_size` fit its vocabulary file, and is a vocabulary file the
one a checkpoint was trained with? And the config that fits a new vocabulary.

A config with fewer ids than the vocabulary has tokens cannot embed the last ones (a lookup
past the table's end: NaNs or a crash deep inside training); that is an error. A config with
more ids than tokens only leaves embedding rows unused: vocabularies are sometimes padded to a
round size for the accelerator, so that is a one-line warning.

Example:
    >>> check_vocab_size(BertConfig.from_json_file("bert_config.json"), "vocab.txt",
    ...                  config_file="bert_config.json")
    30522
    >>> vocab_difference("model/vocab.txt", "shuffled.txt")
    'model/vocab.txt (30522 tokens) is not shuffled.txt (30522 tokens; they differ from line 2)'
    >>> sized_to_vocab(BertConfig.from_name("bert_mini"), "learned/vocab.txt").vocab_size
    6842
"""

import dataclasses
import logging

from bert_tf.text.vocab import load_vocab

logger = logging.getLogger("bert_tf.text")


def check_vocab_size(config, vocab_file, config_file=None):
    """Checks `config.vocab_size` against the tokens of `vocab_file`; returns their number.

    Raises ValueError naming both when the config has fewer ids than the file has tokens;
    logs a warning when it has more. `config_file` names the config in the messages.
    """
    num_tokens = len(load_vocab(vocab_file))
    config_name = config_file or "the model config"
    if config.vocab_size < num_tokens:
        raise ValueError(
            f"{config_name}: vocab_size {config.vocab_size} is smaller than the {num_tokens} "
            f"tokens of {vocab_file}; the ids of the last {num_tokens - config.vocab_size} "
            f"tokens have no embedding (use the config that belongs to this vocabulary)")
    if config.vocab_size > num_tokens:
        logger.warning("%s: vocab_size %d is larger than the %d tokens of %s; the last %d "
                       "embedding rows are never used (padded vocabularies do this)",
                       config_name, config.vocab_size, num_tokens, vocab_file,
                       config.vocab_size - num_tokens)
    return num_tokens


def sized_to_vocab(config, vocab_file):
    """`config` with `vocab_size` the number of tokens of `vocab_file`: the model to pre-train
    on a vocabulary learned for it."""
    return dataclasses.replace(config, vocab_size=len(load_vocab(vocab_file)))


def vocab_difference(vocab_file, other_file, name=None):
    """None when `other_file` holds the tokens of `vocab_file` in the same order, else a phrase
    naming both (`vocab_file` as `name` when given), their sizes and the first line where they
    differ."""
    theirs, ours = load_vocab(vocab_file), load_vocab(other_file)
    if theirs == ours:
        return None
    line = next((i for i, (a, b) in enumerate(zip(theirs, ours), start=1) if a != b),
                min(len(theirs), len(ours)) + 1)
    return (f"{name or vocab_file} ({len(theirs)} tokens) is not {other_file} ({len(ours)} "
            f"tokens; they differ from line {line})")
