"""Text files to TFRecords in one process: what the reader gets back, sharding, compression,
chunks, determinism and the counting of skipped input (parallel workers: tests/tools)."""

import glob
import io
import os
import re

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.data.pretraining.corpus import CorpusStatistics, read_document_chunks
from bert_tf.data.pretraining import records_writer
from bert_tf.data.pretraining.records_writer import write_pretraining_data
from bert_tf.data.pretraining.records_dataset import (count_records, feature_spec, record_lengths,
                                              training_dataset)
from bert_tf.text.vocab import load_vocab
from tests.data.pretraining.toy_corpus import (CLS, FIRST_NUMBERED, SEP, numbered_documents,
                                               write_corpus, write_vocab)
from tests.resources import minilm_dir, shared_data_path

OPTIONS = {"max_seq_length": 24, "max_predictions_per_seq": 4, "dupe_factor": 2}


@pytest.fixture
def corpus(tmp_path):
    documents = numbered_documents([3, 1, 6, 2, 5, 4, 2], 4)
    return {"text": write_corpus(tmp_path / "corpus.txt", documents), "documents": documents,
            "vocab": write_vocab(tmp_path), "dir": tmp_path}


def write(corpus, outputs, **kwargs):
    options = {**OPTIONS, **kwargs}
    paths = [str(corpus["dir"] / name) for name in outputs]
    statistics = write_pretraining_data(
        options.pop("inputs", [corpus["text"]]), paths, corpus["vocab"], do_lower_case=True,
        num_workers=0, progress_stream=options.pop("progress_stream", None), **options)
    return paths, statistics


def parsed_records(paths, compression="", max_seq_length=24, max_predictions=4):
    records = tf.data.TFRecordDataset(paths, compression_type=compression)
    spec = feature_spec(max_seq_length, max_predictions)
    return [{k: v.numpy().tolist() for k, v in tf.io.parse_single_example(r, spec).items()}
            for r in records]


def unmasked_tokens(record):
    tokens = list(record["input_ids"])
    for position, label, weight in zip(record["masked_lm_positions"], record["masked_lm_ids"],
                                       record["masked_lm_weights"]):
        if weight:
            tokens[position] = label
    return tokens[:sum(record["input_mask"])]


def test_records_hold_the_corpus_as_the_reader_expects(corpus):
    paths, statistics = write(corpus, ["out.tfrecord"])
    assert record_lengths(paths[0]) == (24, 4)
    records = parsed_records(paths)
    assert len(records) == statistics.instances == count_records(paths)
    assert (statistics.documents, statistics.sentences) == (7, 23)
    seen = set()
    for record in records:
        tokens = unmasked_tokens(record)
        assert tokens[0] == CLS and tokens[-1] == SEP and tokens.count(SEP) == 2
        assert record["input_mask"] == [1] * len(tokens) + [0] * (24 - len(tokens))
        seen.update(t - FIRST_NUMBERED for t in tokens if t not in (CLS, SEP))
    assert seen == set(range(23 * 4))      # every word of the corpus is in some instance
    batch = next(iter(training_dataset(paths, 8, 24, 4)))
    assert batch["input_word_ids"].shape == (8, 24)


def test_round_robin_over_output_files_and_gzip(corpus):
    paths, statistics = write(corpus, ["a.tfrecord.gz", "b.tfrecord.gz", "c.tfrecord.gz"],
                              gzip=True)
    counts = [len(parsed_records([path], "GZIP")) for path in paths]
    assert sum(counts) == statistics.instances and max(counts) - min(counts) <= 1
    plain, _ = write(corpus, ["plain.tfrecord"])
    # The same records, one file, uncompressed.
    assert sorted(map(str, parsed_records(paths, "GZIP"))) == sorted(
        map(str, parsed_records(plain)))
    with pytest.raises(tf.errors.DataLossError):
        parsed_records(paths[:1])


def test_same_seed_same_bytes_other_seed_other_records(corpus):
    def file_bytes(name, seed):
        paths, _ = write(corpus, [name], random_seed=seed)
        with open(paths[0], "rb") as f:
            return f.read()

    assert file_bytes("a.tfrecord", 1) == file_bytes("b.tfrecord", 1)
    assert file_bytes("c.tfrecord", 1) != file_bytes("d.tfrecord", 2)


def test_random_next_sentences_come_from_the_chunk(corpus):
    # Chunks of two documents at least (the smallest chunk size: 1 byte): a "random" B comes
    # from A's chunk, from its other document. With chunks of one document (before), every
    # "random" B came from A's own document, labelled as random.
    def document_of(token):
        return (token - FIRST_NUMBERED) // 4

    sentence_document = [d for d, document in enumerate(corpus["documents"]) for _ in document]
    chunk_of = {}
    for index, chunk in enumerate(read_document_chunks([corpus["text"]], 1, CorpusStatistics())):
        for document in chunk:
            chunk_of[len(chunk_of)] = index
    assert len(set(chunk_of.values())) == 3  # 7 documents: 2, 2 and 3
    for max_chunk_bytes in (1, 1 << 20):
        paths, _ = write(corpus, [f"chunks{max_chunk_bytes}.tfrecord"], dupe_factor=10,
                         max_chunk_bytes=max_chunk_bytes)
        other_documents = 0
        for record in parsed_records(paths):
            tokens = unmasked_tokens(record)
            first_sep = tokens.index(SEP)
            a_document = sentence_document[document_of(tokens[1])]
            b_document = sentence_document[document_of(tokens[first_sep + 1])]
            if record["next_sentence_labels"] == [1]:
                other_documents += a_document != b_document
                if max_chunk_bytes == 1:
                    assert chunk_of[a_document] == chunk_of[b_document]
            else:
                assert a_document == b_document
        assert other_documents > 0


def test_skipped_lines_and_empty_documents_are_counted(corpus, tmp_path):
    bad = tmp_path / "bad.txt"
    # A latin-1 line, a line of control characters only (no tokens), and a document made only
    # of such a line.
    bad.write_bytes(b"w1 w2 w3.\n\xe9t\xe9 w4.\n\x01\x02\nw5 w6.\n\n\x03\n\nw7.\n")
    progress = io.StringIO()
    _, statistics = write(corpus, ["out.tfrecord"], inputs=[str(bad)], progress_stream=progress)
    assert statistics.invalid_utf8_lines == {str(bad): 1}
    assert (statistics.lines_without_tokens, statistics.empty_documents) == (2, 1)
    assert (statistics.documents, statistics.sentences) == (2, 3)
    assert statistics.skipped_lines == 3
    last_line = progress.getvalue().splitlines()[-1]
    size = os.path.getsize(bad)
    assert last_line.startswith(f"create_pretraining_data: 100.0% of {size} bytes read, 2 "
                                f"documents, {statistics.instances:,} instances (")


def long_lines_corpus(tmp_path):
    """Three one-line documents of 45 words (a paragraph or a book per line; 21 pieces fit in
    a sequence of 24) and one of 4 words, which fits."""
    documents = numbered_documents([1, 1, 1, 1], 45)
    documents[3] = [" ".join(documents[3][0].split()[:4])]
    return write_corpus(tmp_path / "long.txt", documents)


def seen_words(paths):
    return {t - FIRST_NUMBERED for record in parsed_records(paths)
            for t in unmasked_tokens(record) if t not in (CLS, SEP)}


def test_lines_longer_than_a_sequence_are_truncated_as_in_the_original_and_counted(corpus,
                                                                                     tmp_path):
    paths, statistics = write(corpus, ["out.tfrecord"], inputs=[long_lines_corpus(tmp_path)],
                              dupe_factor=1)
    assert (statistics.documents, statistics.sentences, statistics.long_lines,
            statistics.long_line_pieces, statistics.pieces_beyond_a_sequence) == (
        4, 4, 3, 3 * 45, 3 * (45 - 21))
    seen = seen_words(paths)
    assert len(seen) < 3 * 45 + 4  # truncation drops words of the long lines...
    assert set(range(3 * 45, 3 * 45 + 4)) <= seen  # ...not of the line that fits
    assert statistics.report().splitlines()[-1] == (
        "Truncated 3 lines longer than a sequence, as the original does: an instance keeps at "
        "most a sequence of such a line (72 of their 135 pieces do not fit); split such text "
        "into sentences, one per line, or cut such lines into pieces of half a sequence "
        "(create_pretraining_data --cut_long_lines).")


def test_lines_longer_than_a_sequence_are_cut_whole_into_pieces_on_request(corpus, tmp_path):
    # Every word of a long line is then in some instance, and the report says what was done.
    paths, statistics = write(corpus, ["out.tfrecord"], inputs=[long_lines_corpus(tmp_path)],
                              dupe_factor=1, cut_long_sentences=True)
    assert (statistics.documents, statistics.sentences, statistics.long_lines,
            statistics.pieces_beyond_a_sequence) == (4, 4, 3, 0)
    assert seen_words(paths) == set(range(3 * 45 + 4))
    assert statistics.report().splitlines()[-1] == (
        "Cut 3 lines longer than a sequence into pieces of half a sequence, paired as "
        "sentences: split such text into sentences, one per line, for pairs that break at "
        "sentence ends.")


class TickingClock:
    """Stands for the `time` module of `records_writer`: each reading is 20 s later, more than
    the 10 s between two progress lines in a log file."""

    def __init__(self):
        self.now = 0.0

    def monotonic(self):
        self.now += 20.0
        return self.now


def test_progress_lines_count_documents_and_instances_with_an_eta(corpus, monkeypatch):
    monkeypatch.setattr(records_writer, "time", TickingClock())
    progress = io.StringIO()
    paths, statistics = write(corpus, ["out.tfrecord"], max_chunk_bytes=40,
                              progress_stream=progress)
    pattern = re.compile(r"create_pretraining_data: +([\d.]+)% of ([\d,]+) bytes read, ([\d,]+) "
                         r"documents, ([\d,]+) instances \(([\d,]+)/s\)(?:, ETA (\S+)| in (\S+))$")
    header, *progress_lines = progress.getvalue().splitlines()
    assert header == f"Reading 1 files, writing 1 files: {paths[0]}"
    lines = [pattern.match(line) for line in progress_lines]
    assert all(lines), progress.getvalue()
    assert len(lines) >= 3  # one per chunk written (the clock ticks past the refresh each time)
    number = lambda text: int(text.replace(",", ""))  # noqa: E731
    for index, line in enumerate(lines[:-1], 1):
        percent, instances = float(line[1]), number(line[4])
        minutes, _, seconds = line[6].rstrip("s").rpartition(":")
        eta = 60 * int(minutes or 0) + int(seconds)
        elapsed = 20.0 * index  # the clock's readings since the start
        assert number(line[5]) == round(instances / elapsed)
        assert eta == pytest.approx(elapsed * (100 - percent) / percent, abs=0.5 + 0.002 * eta)
    documents = [number(line[3]) for line in lines]
    assert documents == sorted(documents)
    last = lines[-1]
    assert float(last[1]) == 100.0 and number(last[2]) == os.path.getsize(corpus["text"])
    assert (number(last[3]), number(last[4])) == (statistics.documents, statistics.instances)
    assert last[7] == f"{len(lines) * 20 // 60}:{len(lines) * 20 % 60:02d}"


@pytest.mark.parametrize("content", [b"", b"\n \n\t\n", b"\x01\x02\n\n\x03\n"],
                         ids=["empty", "blank_lines", "no_tokens"])
def test_input_without_instances_is_an_error_naming_it(corpus, tmp_path, content):
    text = tmp_path / "nothing.txt"
    text.write_bytes(content)
    lines = content.count(b"\n")
    message = (f"^{re.escape(str(text))}: no text to make pre-training instances from "
               f"\\({lines} lines, {len(content)} bytes, 0 documents with tokens\\); "
               f"nothing written$")
    # A file of an earlier run is left as it was: "nothing written" holds.
    (corpus["dir"] / "out-0.tfrecord").write_bytes(b"earlier records")
    with pytest.raises(ValueError, match=message):
        write(corpus, ["out-0.tfrecord", "out-1.tfrecord"], inputs=[str(text)])
    assert glob.glob(str(corpus["dir"] / "out-*")) == [str(corpus["dir"] / "out-0.tfrecord")]
    assert (corpus["dir"] / "out-0.tfrecord").read_bytes() == b"earlier records"


def test_input_without_utf8_text_is_an_error_saying_so(corpus, tmp_path):
    text = tmp_path / "latin1.txt"
    content = "Café au lait.\nNaïve résumé.\n\nÜber.\n".encode("latin-1")
    text.write_bytes(content)
    message = (f"{text}: no text to make pre-training instances from (4 lines, {len(content)} "
               f"bytes, 0 documents with tokens); 3 lines are not valid UTF-8: convert the text "
               f"to UTF-8 (e.g. iconv -f latin1 -t utf-8); nothing written")
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        write(corpus, ["out.tfrecord"], inputs=[str(text)])
    assert not glob.glob(str(corpus["dir"] / "out*"))


def test_outputs_that_are_inputs_each_other_or_directories_are_refused(corpus, tmp_path):
    text = corpus["text"]
    with open(text, "rb") as f:
        content = f.read()
    os.symlink(text, tmp_path / "link.txt")
    (tmp_path / "directory").mkdir()
    outputs = ["link.txt", "a.tfrecord", "sub/../a.tfrecord", "directory"]
    message = (f"output file {tmp_path}/link.txt is also an input file; output file "
               f"{tmp_path}/sub/../a.tfrecord is named twice; output file {tmp_path}/directory "
               f"is a directory: name other output files")
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        write(corpus, outputs)
    with open(text, "rb") as f:
        assert f.read() == content
    assert sorted(os.listdir(tmp_path)) == ["corpus.txt", "directory", "link.txt", "vocab.txt"]


class Interrupted(Exception):
    """Stands for a Ctrl-C or a failure in the middle of a run."""


def test_a_failed_run_leaves_the_outputs_as_they_were(corpus, monkeypatch):
    paths, _ = write(corpus, ["a.tfrecord", "b.tfrecord"], max_chunk_bytes=40)
    before = {path: open(path, "rb").read() for path in paths}
    chunks = []

    def failing_on_the_third_chunk(self, chunk_index, documents):
        chunks.append(chunk_index)
        if chunk_index == 2:
            raise Interrupted()
        return processor_call(self, chunk_index, documents)

    processor_call = records_writer._ChunkProcessor.__call__
    monkeypatch.setattr(records_writer._ChunkProcessor, "__call__", failing_on_the_third_chunk)
    with pytest.raises(Interrupted):
        write(corpus, ["a.tfrecord", "b.tfrecord"], max_chunk_bytes=40, random_seed=2)
    assert chunks == [0, 1, 2]       # records were written to the files being made
    assert {path: open(path, "rb").read() for path in paths} == before
    assert sorted(os.listdir(corpus["dir"])) == ["a.tfrecord", "b.tfrecord", "corpus.txt",
                                                 "vocab.txt"]
    monkeypatch.undo()
    write(corpus, ["a.tfrecord", "b.tfrecord"], max_chunk_bytes=40, random_seed=2)
    assert {path: open(path, "rb").read() for path in paths} != before    # a run replaces them


def test_vocabulary_without_mask_is_an_error(corpus, tmp_path):
    vocab = tmp_path / "no_mask.txt"
    vocab.write_text("".join(t + "\n" for t in load_vocab(corpus["vocab"]) if t != "[MASK]"))
    with pytest.raises(ValueError, match=r"lacks \['\[MASK\]'\]"):
        write_pretraining_data([corpus["text"]], [str(tmp_path / "x.tfrecord")], str(vocab),
                               True, num_workers=0, progress_stream=None)


def test_gutenberg_with_a_real_vocabulary(tmp_path):
    # Real books, a 30k-piece uncased vocabulary, and a file with lines in latin-1.
    books = [shared_data_path("gutenberg/chesterton-ball.txt"),
             shared_data_path("gutenberg/blake-poems.txt")]
    vocab = os.path.join(minilm_dir(), "vocab.txt")
    paths = [str(tmp_path / f"gutenberg-{i}.tfrecord") for i in range(2)]
    statistics = write_pretraining_data(books, paths, vocab, True, num_workers=0,
                                        progress_stream=None, max_seq_length=128,
                                        max_predictions_per_seq=20, dupe_factor=1,
                                        whole_word_mask=True)
    assert statistics.invalid_utf8_lines == {books[0]: 2}
    assert count_records(paths) == statistics.instances > 1000
    batch = next(iter(training_dataset(paths, 64, 128, 20)))
    weights = batch["masked_lm_weights"].numpy()
    assert weights.sum() > 64 and set(np.unique(weights)) <= {0.0, 1.0}
    assert set(batch["next_sentence_labels"].numpy()) == {0, 1}
    assert glob.glob(str(tmp_path / "gutenberg-*.tfrecord")) and all(
        os.path.getsize(p) > 0 for p in paths)
