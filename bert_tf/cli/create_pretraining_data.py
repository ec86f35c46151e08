"""Creates BERT pre-training TFRecords (masked LM + next sentence) from raw text.

Google's `create_pretraining_data.py`, same flags and same records (`run_pretraining.py` reads
either), streamed and parallel: the input is read in chunks of `--chunk_size_mb` of whole
documents (random next sentences come from the same chunk), which worker processes
(`--num_workers`, default one per core) tokenize and turn into instances. Progress goes to
stderr; lines that are not valid UTF-8 or have no tokens, and empty documents, are skipped and
counted in the closing report. Each output file is written as FILE.incomplete and renamed when
all are complete: a run that fails or is interrupted leaves earlier files as they were.

Input: one sentence per line, a blank line between documents; a file's end ends a document.
A line longer than a sequence (--max_seq_length - 3 word pieces: a paragraph, a web page or a
book per line) is truncated as in the original: an instance keeps one sequence of it and drops
the rest; the closing report counts such lines and their pieces that do not fit.
--cut_long_lines cuts them instead into pieces of half a sequence, which pair as sentences do,
so that nothing of them is lost (at the price of pairs that break mid-sentence, which cost
held-out accuracy on one-sentence-per-line text).

Example:
    bert-tf-create-pretraining-data --input_file="corpus/*.txt" \\
        --output_file=/tmp/pretrain/data.tfrecord --num_output_shards=8 \\
        --vocab_file=vocab.txt --do_lower_case --max_seq_length=128 \\
        --max_predictions_per_seq=20 --masked_lm_prob=0.15 --dupe_factor=10 --random_seed=12345
    bert-tf-run-pretraining --input_file="/tmp/pretrain/data.tfrecord-*" ...
"""

import contextlib
import signal
import sys

from absl import app, flags

from bert_tf.cli import tfds_flags
from bert_tf.cli.app import run_tool
from bert_tf.cli.path_checks import input_file_problem
from bert_tf.data.pretraining.chunk_size import DEFAULT_CHUNK_BYTES

FLAGS = flags.FLAGS


def define_flags():
    # The original flags (same names, meaning and defaults).
    flags.DEFINE_string("input_file", None,
                        "Input raw text file (or comma-separated list of files or globs).")
    flags.DEFINE_string("output_file", None,
                        "Output TF example file (or comma-separated list of files).")
    flags.DEFINE_string("vocab_file", None,
                        "The vocabulary file that the BERT model was trained on.")
    flags.DEFINE_bool("do_lower_case", True, "Whether to lower case the input text. Should be True "
                      "for uncased models and False for cased models.")
    flags.DEFINE_bool("do_whole_word_mask", False,
                      "Whether to use whole word masking rather than per-WordPiece masking.")
    flags.DEFINE_integer("max_seq_length", 128, "Maximum sequence length.")
    flags.DEFINE_integer("max_predictions_per_seq", 20,
                         "Maximum number of masked LM predictions per sequence.")
    flags.DEFINE_integer("random_seed", 12345, "Random seed for data generation.")
    flags.DEFINE_integer("dupe_factor", 10,
                         "Number of times to duplicate the input data (with different masks).")
    flags.DEFINE_float("masked_lm_prob", 0.15, "Masked LM probability.")
    flags.DEFINE_float("short_seq_prob", 0.1, "Probability of creating sequences which are shorter "
                       "than the maximum length.")
    # Additions.
    flags.DEFINE_integer("num_output_shards", 1, "Write each --output_file as this many shards "
                         "FILE-00000-of-0000N (instances go round-robin over all files).")
    flags.DEFINE_bool("gzip", False, "GZIP-compress the output records.")
    flags.DEFINE_bool("cut_long_lines", False, "Cut a line longer than a sequence (a paragraph "
                      "or a book per line) into pieces of half a sequence that pair as "
                      "sentences, instead of truncating it as the original does.")
    flags.DEFINE_integer("num_workers", None, "Worker processes (default: one per core; 0: none, "
                         "everything in this process).", lower_bound=0)
    flags.DEFINE_float("chunk_size_mb", DEFAULT_CHUNK_BYTES / 2**20,
                       "Megabytes of text per chunk (and two documents at least): the memory "
                       "bound of a worker, and the pool random next sentences are drawn from.",
                       lower_bound=0.0)
    # Instead of --input_file: a TFDS text dataset, one example = one document.
    tfds_flags.define_pretraining_tfds_flags()
    flags.mark_flags_as_required(["output_file", "vocab_file"])


def output_files(output_file, num_output_shards):
    """The files named by `--output_file` (comma-separated), each split into
    `num_output_shards` shards when that is more than 1."""
    names = [name.strip() for name in output_file.split(",") if name.strip()]
    if not names:
        raise ValueError("--output_file is empty: give one or more comma-separated file names")
    if num_output_shards < 1:
        raise ValueError(f"--num_output_shards must be at least 1, got {num_output_shards}")
    if num_output_shards == 1:
        return names
    return [f"{name}-{shard:05d}-of-{num_output_shards:05d}"
            for name in names for shard in range(num_output_shards)]


def main():
    if bool(FLAGS.input_file) == bool(FLAGS.tfds_name):
        raise app.UsageError("give --input_file (text files) or --tfds_name (a TFDS text "
                             "dataset), one of them")
    vocab_problem = input_file_problem("vocab_file", FLAGS.vocab_file)
    if vocab_problem:
        raise app.UsageError(vocab_problem)
    from bert_tf.data.pretraining.corpus import expand_text_files
    from bert_tf.data.pretraining.records_writer import write_pretraining_data

    if FLAGS.tfds_name:
        from bert_tf.data.tfds.pretraining_text import TfdsText

        source = TfdsText(FLAGS.tfds_name, FLAGS.tfds_split, FLAGS.tfds_data_dir,
                          FLAGS.tfds_text_key)
        inputs, read_lines = source.files, source.lines
    else:
        inputs, read_lines = expand_text_files(FLAGS.input_file, flag="--input_file"), None
    outputs = output_files(FLAGS.output_file, FLAGS.num_output_shards)
    with _sigterm_raised():
        statistics = write_pretraining_data(
            inputs, outputs, FLAGS.vocab_file, FLAGS.do_lower_case,
            random_seed=FLAGS.random_seed, num_workers=FLAGS.num_workers,
            max_chunk_bytes=int(FLAGS.chunk_size_mb * 2**20), gzip=FLAGS.gzip,
            max_seq_length=FLAGS.max_seq_length,
            max_predictions_per_seq=FLAGS.max_predictions_per_seq,
            masked_lm_prob=FLAGS.masked_lm_prob, short_seq_prob=FLAGS.short_seq_prob,
            whole_word_mask=FLAGS.do_whole_word_mask, dupe_factor=FLAGS.dupe_factor,
            cut_long_sentences=FLAGS.cut_long_lines, read_lines=read_lines)
    print(statistics.report(), file=sys.stderr)


class _Terminated(Exception):
    """SIGTERM arrived while the records were written."""


@contextlib.contextmanager
def _sigterm_raised():
    """SIGTERM (`timeout`, a scheduler, `docker stop`) as an exception in this block, so that
    the writing stops as on Ctrl-C: workers ended, no `.incomplete` file left, one line. By
    Python's default the process died at once, its workers living on."""
    def terminate(_signum, _frame):
        raise _Terminated

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    except _Terminated:
        raise RuntimeError("terminated (SIGTERM): nothing written, the output files are as "
                           "they were") from None
    finally:
        signal.signal(signal.SIGTERM, previous)


def run():
    run_tool(main, define_flags)
