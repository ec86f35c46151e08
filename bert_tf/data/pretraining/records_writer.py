"""Text files to pre-training TFRecords: `tools/create_pretraining_data.py`'s engine.

The corpus is streamed in chunks of whole documents (`corpus`); worker processes
tokenize each chunk with the in-graph `BertTokenizer` (thousands of lines per call) and turn
it into serialized instances (`instances`), while this process writes them,
round-robin over the output files as the original does. Python's instance creation holds the
GIL, so the parallelism is a pool of processes; at most two chunks per worker are in flight,
which bounds memory. Chunk `k` draws from `random.Random("<random_seed>:<k>")` and results are
written in chunk order, so the output depends on the seed and the chunk size, never on the
number of workers.

Example:
    >>> statistics = write_pretraining_data(
    ...     ["wiki.txt"], ["wiki-0.tfrecord", "wiki-1.tfrecord"], "vocab.txt",
    ...     do_lower_case=True, random_seed=12345, num_workers=2, max_seq_length=128,
    ...     max_predictions_per_seq=20, dupe_factor=10)
    >>> print(statistics.report())
"""

import collections
import concurrent.futures
import contextlib
import multiprocessing
import os
import random
import signal
import sys
import threading
import time

import tensorflow as tf

from bert_tf.data.pretraining.chunk_size import DEFAULT_CHUNK_BYTES
from bert_tf.data.pretraining.masking import MaskedLmVocab
from bert_tf.data.pretraining.corpus import (CorpusStatistics, file_names, input_bytes,
                                             read_document_chunks)
from bert_tf.data.pretraining.instances import PretrainingInstanceBuilder
from bert_tf.data.pretraining.records_dataset import INCOMPLETE_SUFFIX
from bert_tf.file_io import output_file_problems
from bert_tf.text.bert_tokenizer import BertTokenizer
from bert_tf.text.vocab import load_vocab

# Lines per tokenizer call: large calls amortize the per-call cost of the TensorFlow ops.
_TOKENIZE_BATCH_LINES = 4096
# Seconds between progress lines on a terminal, and in a log file.
_TERMINAL_REFRESH, _LOG_REFRESH = 0.2, 10.0

_worker_processor = None  # the _ChunkProcessor of a worker process


def write_pretraining_data(input_files, output_files, vocab_file, do_lower_case,
                           random_seed=12345, num_workers=None,
                           max_chunk_bytes=DEFAULT_CHUNK_BYTES, gzip=False,
                           progress_stream=sys.stderr, read_lines=None, **instance_options):
    """Writes the instances of `input_files` to `output_files`; returns `CorpusStatistics`.

    An output file that is also an input file, is named twice or is a directory is a
    ValueError before anything is read or written. Input that gives no instance at all (empty
    files, only blank lines or characters without tokens) is a ValueError naming the files.
    Each output is written to `<output>.incomplete` and renamed into place once all are
    complete: a run that fails or is interrupted leaves the files that were there as they were.

    Args:
        input_files: text files (one sentence per line, blank lines between documents).
        output_files: TFRecord files, written round-robin (more files: smaller shards).
        vocab_file, do_lower_case: the tokenizer's vocabulary and casing.
        random_seed: the seed everything random derives from.
        num_workers: worker processes (default: one per core); 0 works in this process.
        max_chunk_bytes: text per chunk (see `corpus`).
        gzip: GZIP-compress the records (`tf.data.TFRecordDataset(files, "GZIP")` reads them).
        progress_stream: where the files' count and progress go (None: nowhere).
        read_lines: how a file's lines are read (see `read_document_chunks`; default text).
        **instance_options: `PretrainingInstanceBuilder` arguments (max_seq_length,
            max_predictions_per_seq, masked_lm_prob, short_seq_prob, whole_word_mask,
            dupe_factor).
    """
    problems = output_file_problems(output_files, input_files)
    if problems:
        raise ValueError(f"{'; '.join(problems)}: name other output files")
    num_workers = os.cpu_count() if num_workers is None else num_workers
    # A bad vocabulary or option is reported now, before any process starts or line is shown.
    PretrainingInstanceBuilder(MaskedLmVocab(load_vocab(vocab_file)), **instance_options)
    if progress_stream is not None:
        print(f"Reading {len(input_files)} files, writing {len(output_files)} files: "
              f"{', '.join(output_files[:3])}{', ...' if len(output_files) > 3 else ''}",
              file=progress_stream, flush=True)
    settings = (vocab_file, do_lower_case, random_seed, instance_options)
    statistics = CorpusStatistics()
    progress = _Progress(input_bytes(input_files), progress_stream)
    options = tf.io.TFRecordOptions(compression_type="GZIP" if gzip else "")
    for path in output_files:
        if os.path.dirname(path):
            tf.io.gfile.makedirs(os.path.dirname(path))
    with _replaced_on_success(output_files) as temporary_files:
        writers = [tf.io.TFRecordWriter(path, options) for path in temporary_files]
        written = 0

        def write(result, bytes_done):
            nonlocal written
            records, chunk_statistics = result
            for record in records:
                writers[written % len(writers)].write(record)
                written += 1
            statistics.merge(chunk_statistics)
            progress.update(statistics, bytes_done)

        chunks = read_document_chunks(input_files, max_chunk_bytes, statistics, read_lines)
        try:
            if num_workers == 0:
                processor = _ChunkProcessor(*settings)
                for index, documents in enumerate(chunks):
                    write(processor(index, documents), statistics.bytes)
            else:
                with concurrent.futures.ProcessPoolExecutor(
                        num_workers, mp_context=multiprocessing.get_context("spawn"),
                        initializer=_start_worker, initargs=(*settings, num_workers)) as pool:
                    in_flight = collections.deque()
                    try:
                        for index, documents in enumerate(chunks):
                            # The first submissions start the workers.
                            with (_sigint_ignored() if index < num_workers
                                  else contextlib.nullcontext()):
                                future = pool.submit(_process_chunk, index, documents)
                            in_flight.append((future, statistics.bytes))
                            if len(in_flight) >= 2 * num_workers:
                                future, bytes_done = in_flight.popleft()
                                write(future.result(), bytes_done)
                        while in_flight:
                            future, bytes_done = in_flight.popleft()
                            write(future.result(), bytes_done)
                    except BaseException:
                        _end_workers(pool)
                        raise
        finally:
            for writer in writers:
                writer.close()
            progress.close(statistics, statistics.bytes)
        if not statistics.instances:
            # Empty record files would only fail later, in run_pretraining, far from the cause.
            # Text in another encoding (Latin-1, say) gets here with every line skipped.
            raise ValueError(f"{file_names(input_files) or 'the input'}: no text to make "
                             f"pre-training instances from ({statistics.lines:,} lines, "
                             f"{statistics.bytes:,} bytes, {statistics.documents:,} documents "
                             f"with tokens){statistics.invalid_utf8_advice()}; nothing written")
    return statistics


def _end_workers(pool):
    """Ends `pool`'s worker processes now, its queued chunks dropped: after an error or a
    signal, nothing they make is written, and the pool's own exit would wait for every chunk
    submitted. (SIGTERM reaches only this process: its workers, ~0.7 GB each, lived on.)"""
    pool.shutdown(wait=False, cancel_futures=True)
    # ProcessPoolExecutor has no public way to stop running workers before Python 3.14.
    processes = getattr(pool, "_processes", None) or {}
    for process in list(processes.values()):
        process.terminate()


@contextlib.contextmanager
def _sigint_ignored():
    """Ignores Ctrl-C (SIGINT) in this block: a worker process started in it ignores it for
    good (an ignored signal stays ignored across exec, and Python then installs no handler).
    Ctrl-C reaches every process of the terminal's group: this process says `interrupted` in
    one line and stops the pool, where each worker starting up printed its traceback."""
    if threading.current_thread() is not threading.main_thread():  # no signal handling there
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _temporary(path):
    """Where the output file `path` is written until it is complete."""
    return path + INCOMPLETE_SUFFIX


@contextlib.contextmanager
def _replaced_on_success(paths):
    """Yields the temporary files of `paths`: renamed onto `paths` when the block ends, removed
    when it raises, so that a failed run never truncates or deletes what `paths` held."""
    temporary_files = [_temporary(path) for path in paths]
    try:
        yield temporary_files
    except BaseException:
        for path in temporary_files:
            if tf.io.gfile.exists(path):
                tf.io.gfile.remove(path)
        raise
    for temporary, path in zip(temporary_files, paths):
        tf.io.gfile.rename(temporary, path, overwrite=True)


class _ChunkProcessor:
    """Tokenizes a chunk's documents and turns them into serialized instances."""

    def __init__(self, vocab_file, do_lower_case, random_seed, instance_options):
        tokenizer = BertTokenizer(vocab_file, do_lower_case)
        self.random_seed = random_seed
        self.builder = PretrainingInstanceBuilder(MaskedLmVocab(tokenizer.vocab),
                                                  **instance_options)
        # Traced once per process: each eager call of the tokenizer costs far more.
        self.tokenize = tf.function(
            lambda texts: tokenizer.tokenize_to_pieces(texts),
            input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)

    def __call__(self, chunk_index, documents):
        statistics = CorpusStatistics()
        documents = self._tokenized(documents, statistics)
        rng = random.Random(f"{self.random_seed}:{chunk_index}")
        instances = self.builder.create_training_instances(documents, rng) if documents else []
        statistics.instances = len(instances)
        return [self.builder.serialize(instance) for instance in instances], statistics

    def _tokenized(self, documents, statistics):
        """The documents as lists of sentences of ids, without lines or documents that have no
        tokens (the original drops both silently; here they are counted), lines longer than a
        sequence counted and, with `cut_long_sentences`, cut into pieces (`sentence_pieces`)."""
        lines = [line for document in documents for line in document]
        sentences = []
        for start in range(0, len(lines), _TOKENIZE_BATCH_LINES):
            ids = self.tokenize(tf.constant(lines[start:start + _TOKENIZE_BATCH_LINES]))
            values, splits = ids.flat_values.numpy().tolist(), ids.row_splits.numpy()
            sentences.extend(values[begin:end] for begin, end in zip(splits[:-1], splits[1:]))
        tokenized, position = [], 0
        for document in documents:
            kept = [sentence for sentence in sentences[position:position + len(document)]
                    if sentence]
            position += len(document)
            statistics.lines_without_tokens += len(document) - len(kept)
            if kept:
                long = [sentence for sentence in kept if self.builder.is_long(sentence)]
                statistics.long_lines += len(long)
                statistics.long_line_pieces += sum(map(len, long))
                if not self.builder.cut_long_sentences:
                    statistics.pieces_beyond_a_sequence += sum(
                        len(sentence) - self.builder.max_num_tokens for sentence in long)
                pieces = [self.builder.sentence_pieces(sentence) for sentence in kept]
                tokenized.append([piece for cut in pieces for piece in cut])
                statistics.documents += 1
                statistics.sentences += len(kept)
            else:
                statistics.empty_documents += 1
        return tokenized


def _start_worker(vocab_file, do_lower_case, random_seed, instance_options, num_workers):
    global _worker_processor
    # The workers share the cores: one thread each for TensorFlow's ops.
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(max(1, os.cpu_count() // num_workers))
    _worker_processor = _ChunkProcessor(vocab_file, do_lower_case, random_seed,
                                        instance_options)


def _process_chunk(chunk_index, documents):
    return _worker_processor(chunk_index, documents)


class _Progress:
    """A one-line counter on stderr: redrawn in place on a terminal, a line now and then in a
    log file. The share of the input's bytes read gives the ETA (documents vary too much in
    length for their count to), e.g.

        create_pretraining_data: 37.5% of 812.3 MB read, 12,345 documents, 98,765 instances
        (1,234/s), ETA 3:12
    """

    def __init__(self, total_bytes, stream):
        self.total_bytes = max(total_bytes, 1)
        self.stream = stream
        self.terminal = stream is not None and stream.isatty()
        self.start = self.last = time.monotonic()
        self.shown = None

    def update(self, statistics, bytes_done, final=False):
        counts = (statistics.documents, statistics.instances, bytes_done)
        if self.stream is None or (final and self.shown == counts):
            return
        now = time.monotonic()
        if not final and now - self.last < (_TERMINAL_REFRESH if self.terminal
                                            else _LOG_REFRESH):
            return
        self.last, self.shown = now, counts
        elapsed = max(now - self.start, 1e-9)
        done = bytes_done / self.total_bytes
        if final or done >= 1:  # the last chunk is written: everything is
            timing = f" in {_duration(elapsed)}"
        else:
            timing = f", ETA {_duration(elapsed * (1 - done) / done)}" if done else ""
        line = (f"create_pretraining_data: {100.0 * done:5.1f}% of {_size(self.total_bytes)} "
                f"read, {statistics.documents:,} documents, {statistics.instances:,} instances "
                f"({statistics.instances / elapsed:,.0f}/s){timing}")
        self.stream.write(("\r" + line + "\x1b[K") if self.terminal and not final
                          else line + "\n")
        self.stream.flush()

    def close(self, statistics, bytes_done):
        """The last line (a terminal's counter is redrawn one last time and ended)."""
        if self.terminal:
            self.shown = None
            self.stream.write("\r")
        self.update(statistics, bytes_done, final=True)


def _size(num_bytes):
    """'9,275 bytes' or '812.3 MB'."""
    return f"{num_bytes:,} bytes" if num_bytes < 1e6 else f"{num_bytes / 1e6:,.1f} MB"


def _duration(seconds):
    """'42s', '3:12' or '1:02:03'."""
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{seconds:02d}" if hours else f"{minutes}:{seconds:02d}"
