"""Learns a WordPiece vocabulary (`vocab.txt`) from plain-text files.

Text goes through the same in-graph basic tokenization as the model's inputs (clean-up, CJK and
punctuation splitting, and with --do_lower_case accent stripping + lower-casing), so the learned
pieces are exactly what `BertTokenizer` will look up. Files are streamed line by line in
batches, so their size does not matter. Lines that are not valid UTF-8 are skipped and counted
per file, as create_pretraining_data skips them (TFRecord, GZIP, UTF-16 and other binary files
are refused, not read as text). The vocabulary starts with
[PAD] [UNK] [CLS] [SEP] [MASK] (ids 0-4), then every kept character alone and as a `##`
continuation, then word pieces by frequency, at most --vocab_size tokens in all.

A vocabulary learned from a small corpus has far fewer tokens than a shipped config's 30522;
with --bert_config_file the tool also writes that config with `vocab_size` set to the learned
vocabulary's, as `bert_config.json` beside --output_file: the model to pre-train on it, without
embedding rows and masked-LM outputs that no id reaches.

Example:
    bert-tf-build-vocab --input_file='corpus/*.txt' --output_file=model/vocab.txt \\
        --vocab_size=30522 --do_lower_case --bert_config_file=bert_mini
"""

import os

from absl import app, flags

from bert_tf.cli.app import run_tool
from bert_tf.cli.config_flag import bert_config_file_problem, define_bert_config_file_flag
from bert_tf.file_io import output_file_problems

FLAGS = flags.FLAGS


def define_flags():
    flags.DEFINE_string("input_file", None, "Text files: comma-separated paths or glob patterns.")
    flags.DEFINE_string("output_file", None, "Where to write the vocabulary, one token per line.")
    flags.DEFINE_integer("vocab_size", 30522, "Target (maximum) number of tokens.")
    flags.DEFINE_bool("do_lower_case", True, "Strip accents and lower-case (uncased BERT); "
                      "--nodo_lower_case for a cased vocabulary.")
    flags.DEFINE_integer("max_unique_chars", 1000, "Most frequent characters kept as tokens; words "
                         "with rarer characters do not count towards the word pieces.",
                         lower_bound=1)
    define_bert_config_file_flag("A model config to write as bert_config.json beside "
                                 "--output_file, with vocab_size set to the learned "
                                 "vocabulary's size.")
    flags.mark_flags_as_required(["input_file", "output_file"])


def read_lines(paths, statistics):
    """Yields each line of each file, one file at a time, as create_pretraining_data reads it
    (`corpus.utf8_lines`): a line that is not valid UTF-8 is skipped and counted in
    `statistics`. Keeping it without its invalid bytes gave word pieces of Latin-1 words cut at
    their accented letters ("Café" became "caf")."""
    from bert_tf.data.pretraining.corpus import utf8_lines

    for path in paths:
        for line, _ in utf8_lines(path, statistics):
            yield line


def main():
    if problem := bert_config_file_problem(FLAGS.bert_config_file):
        raise app.UsageError(problem)
    from bert_tf.config import BertConfig
    from bert_tf.data.pretraining.corpus import CorpusStatistics, expand_text_files, file_names
    from bert_tf.text.vocab import count_words, learn_vocab, save_vocab
    from bert_tf.text.vocab_size import sized_to_vocab

    paths = expand_text_files(FLAGS.input_file)
    outputs, inputs = [FLAGS.output_file], list(paths)
    if FLAGS.bert_config_file:  # read first: a bad config fails before the vocabulary is learned
        config = BertConfig.from_json_file(FLAGS.bert_config_file)
        config_file = os.path.join(os.path.dirname(FLAGS.output_file), "bert_config.json")
        outputs.append(config_file)
        inputs.append(FLAGS.bert_config_file)
    problems = output_file_problems(outputs, inputs)
    if problems:
        raise ValueError(f"{problems[0]}: name another --output_file")
    statistics = CorpusStatistics()
    counts = count_words(read_lines(paths, statistics), lower_case=FLAGS.do_lower_case)
    if not counts:
        raise ValueError(f"{file_names(paths)}: no words to learn a vocabulary from "
                         f"({statistics.lines:,} lines, {statistics.bytes:,} bytes)"
                         f"{statistics.invalid_utf8_advice()}")
    vocab = learn_vocab(counts, FLAGS.vocab_size, max_unique_chars=FLAGS.max_unique_chars)
    save_vocab(vocab, FLAGS.output_file)
    print(f"Read {len(paths)} file(s), {sum(counts.values()):,} words ({len(counts):,} distinct); "
          f"wrote {len(vocab):,} tokens to {FLAGS.output_file}")
    for line in statistics.invalid_utf8_report():
        print(line)
    if FLAGS.bert_config_file:
        sized_to_vocab(config, FLAGS.output_file).to_json_file(config_file)
        print(f"Wrote {config_file}: {FLAGS.bert_config_file} with vocab_size {len(vocab):,}")
    return 0


def run():
    run_tool(main, define_flags)
