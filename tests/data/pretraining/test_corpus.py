"""Reading the text corpus: documents, chunks, and the counting of skipped lines."""

import gzip
import re

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.data.pretraining.corpus import (CorpusStatistics, expand_text_files, input_bytes,
                                             invalid_utf8_at_start, read_document_chunks,
                                             text_file_problem)
from bert_tf.data.pretraining.records_dataset import InputFileError
from tests.data.pretraining.records import write_pretraining_records


def write_bytes(path, data):
    path.write_bytes(data)
    return str(path)


def read_all(files, max_chunk_bytes=1 << 20):
    statistics = CorpusStatistics()
    chunks = list(read_document_chunks(files, max_chunk_bytes, statistics))
    return chunks, statistics


def test_blank_lines_separate_documents_and_files_end_them(tmp_path):
    first = write_bytes(tmp_path / "a.txt",
                        "  One.  \nTwo.\r\n\n \t\n\u3000\nThree.\n\xa0\n\nFour.".encode())
    second = write_bytes(tmp_path / "b.txt", b"Five.\n")
    chunks, statistics = read_all([first, second])
    # Whitespace-only lines (Unicode whitespace too, as Python's strip()) separate documents;
    # the end of a.txt ends "Four." even without a blank line.
    assert chunks == [[["One.", "Two."], ["Three."], ["Four."], ["Five."]]]
    assert (statistics.files, statistics.lines) == (2, 10)


def test_invalid_utf8_lines_are_skipped_and_counted_per_file(tmp_path):
    latin1 = write_bytes(tmp_path / "latin1.txt", "Caf\xe9 one.\nFine.\nna\xefve.\n\nNext.\n"
                         .encode("latin-1"))
    clean = write_bytes(tmp_path / "clean.txt", "Café.\n".encode())
    chunks, statistics = read_all([latin1, clean])
    assert chunks == [[["Fine."], ["Next."], ["Café."]]]
    assert statistics.invalid_utf8_lines == {latin1: 2}
    report = statistics.report()
    assert f"{latin1}: 2 lines skipped, not valid UTF-8" in report
    assert "Skipped 2 lines and 0 empty documents." in report
    assert clean not in report


def test_invalid_utf8_at_the_files_start_is_named_with_its_counts(tmp_path):
    latin1 = write_bytes(tmp_path / "latin1.txt", "Caf\xe9 one.\nFine.\nna\xefve.\n\nNext.\n"
                         .encode("latin-1"))
    clean = write_bytes(tmp_path / "clean.txt", "Café.\n".encode())
    assert invalid_utf8_at_start([clean]) is None
    assert invalid_utf8_at_start([latin1, clean]) == (
        f"lines that are not valid UTF-8 are skipped: {latin1}: 2 of 5 lines read; "
        f"convert the text to UTF-8 (e.g. iconv -f latin1 -t utf-8)")
    # Only the first files are read; of each, its start: the line the read cuts is left out,
    # here "Café." cut after its "é"'s first byte, which alone is not UTF-8.
    assert invalid_utf8_at_start([clean, latin1], sampled_files=1) is None
    assert invalid_utf8_at_start([clean], sampled_bytes=4) is None
    assert invalid_utf8_at_start([latin1], sampled_bytes=11) == (
        f"lines that are not valid UTF-8 are skipped: {latin1}: 1 of 1 lines read; "
        f"convert the text to UTF-8 (e.g. iconv -f latin1 -t utf-8)")


def test_chunks_hold_whole_documents_of_at_least_the_chunk_size(tmp_path):
    documents = [[f"Sentence {d}.{s} of document {d}." for s in range(d % 4 + 1)]
                 for d in range(30)]
    text = "\n\n".join("\n".join(document) for document in documents) + "\n"
    path = write_bytes(tmp_path / "corpus.txt", text.encode())
    for max_chunk_bytes in (0, 100, 400, 10**6):
        chunks, statistics = read_all([path], max_chunk_bytes)
        assert statistics.bytes == input_bytes([path])
        assert [document for chunk in chunks for document in chunk] == documents
        for chunk in chunks[:-1]:
            size = sum(len(line) + 1 for document in chunk for line in document)
            assert size >= max_chunk_bytes
            # ... and a chunk is closed as soon as it reaches the size with two documents.
            assert (size - sum(len(line) + 1 for line in chunk[-1]) < max(max_chunk_bytes, 1)
                    or len(chunk) == 2)
        # Two documents at least in every chunk, the last one too: random next sentences
        # come from another document of the chunk.
        assert min(len(chunk) for chunk in chunks) >= 2
    assert [len(chunk) for chunk in read_all([path], 0)[0]] == [2] * 15
    # 31 documents: the last chunk would hold one; it joins the one before.
    with open(path, "a") as f:
        f.write("\nThe last document.\n")
    assert [len(chunk) for chunk in read_all([path], 0)[0]] == [2] * 14 + [3]


def test_reading_streams(tmp_path):
    path = write_bytes(tmp_path / "corpus.txt", b"A.\n\nB.\n\nC.\n\nD.\n\nE.\n\nF.\n")
    statistics = CorpusStatistics()
    chunks = read_document_chunks([path], 0, statistics)
    assert next(chunks) == [["A."], ["B."]]
    # No further than the chunk after the first: had it been the last, with one document,
    # it would have joined the first.
    assert statistics.lines == 8


def test_unreadable_file_is_named(tmp_path):
    missing = str(tmp_path / "missing.txt")
    with pytest.raises(InputFileError, match="missing.txt: cannot read the text file"):
        read_all([missing])


def test_statistics_merge_adds_counts():
    total, part = CorpusStatistics(), CorpusStatistics()
    part.instances, part.lines_without_tokens, part.empty_documents = 7, 2, 1
    part.invalid_utf8_lines["x.txt"] = 3
    total.merge(part)
    total.merge(part)
    assert (total.instances, total.skipped_lines, total.empty_documents) == (14, 10, 2)
    assert "  4 lines skipped, no tokens after tokenization" in total.report()
    assert "  2 documents skipped, no tokens" in total.report()


def test_records_and_gzip_files_are_no_text(tmp_path):
    records = tmp_path / "train.tfrecord"
    write_pretraining_records(records, 50)
    gzip_records = write_bytes(tmp_path / "train.tfrecord.gz",
                               gzip.compress(records.read_bytes()))
    gzip_text = write_bytes(tmp_path / "corpus.txt.gz", gzip.compress(b"One.\nTwo.\n"))
    for path in (str(records), gzip_records):
        message = (f"{path} is a TFRecord file (pre-training records?), not text: give records "
                   f"to run_pretraining's --input_file")
        assert text_file_problem(path) == message
        # As text, their lines that happen to be valid UTF-8 made garbage documents.
        with pytest.raises(InputFileError, match=f"^{re.escape(message)}$"):
            read_all([path])
    message = f"{gzip_text} is GZIP-compressed, not text: decompress it (gunzip)"
    assert text_file_problem(gzip_text) == message
    with pytest.raises(InputFileError, match=f"^{re.escape(message)}$"):
        read_all([gzip_text])
    # A "Unicode" text file of Windows: each line read as UTF-8 held NUL bytes, a blank line
    # did not end a document, a line with a non-ASCII character was skipped.
    for data in ("One.\n\nTwo.\n".encode("utf-16"), "\ufeffOne.\n".encode("utf-16-be"),
                 "One.\n".encode("utf-32")):               # each starts with a byte order mark
        utf16 = write_bytes(tmp_path / "utf16.txt", data)
        assert text_file_problem(utf16) == (
            f"{utf16} is UTF-16 text (it starts with a byte order mark), not UTF-8: convert it "
            f"(e.g. iconv -f utf-16 -t utf-8)")
    # Other binary data: its lines that are valid UTF-8 made a vocabulary of garbage.
    png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR" + bytes(range(256)) * 20
    noise = np.random.default_rng(0).integers(0, 256, 10_000, dtype=np.uint8).tobytes()
    for name, data in (("image.txt", png), ("noise.txt", noise)):
        binary = write_bytes(tmp_path / name, data)
        message = (f"{binary} is binary data (NUL bytes and bytes that are not UTF-8), not "
                   f"text: give text files, one sentence per line")
        assert text_file_problem(binary) == message
        with pytest.raises(InputFileError, match=f"^{re.escape(message)}$"):
            read_all([binary])
    # Text, whatever its name and encoding; NUL bytes in UTF-8 (a padded end) too.
    latin1 = "Café, naïve.\n".encode("latin-1") * 999
    for name, text in (("text.txt", b""), ("text.gz", b"One."), ("t.txt", b"One.\nTwo.\n" * 999),
                       ("nul.txt", b"\0" * 20), ("bom.txt", "\ufeffOne.\n".encode()),
                       ("latin1.txt", latin1), ("cut.txt", "Ça.\0".encode() * 1365 + "é".encode())):
        assert text_file_problem(write_bytes(tmp_path / name, text)) is None
    assert text_file_problem(str(tmp_path / "missing.txt")).startswith(
        f"{tmp_path}/missing.txt: cannot read the text file (")


def test_text_globs_name_every_file_that_is_no_text_at_once(tmp_path):
    records = tmp_path / "b.tfrecord"
    write_pretraining_records(records, 5)
    text = write_bytes(tmp_path / "a.txt", b"One.\n")
    (tmp_path / "texts").mkdir()
    assert expand_text_files(f"{tmp_path}/*.txt, {text}") == [text]
    message = (f"--input_text_file: '{tmp_path}/texts' is a directory: name its files, e.g. "
               f"'{tmp_path}/texts/*'; '{tmp_path}/none*' matches no file; /dev/null is not a "
               f"regular file; {records} is a TFRecord file (pre-training records?), not text: "
               f"give records to run_pretraining's --input_file")
    with pytest.raises(InputFileError, match=f"^{re.escape(message)}$"):
        expand_text_files(f"{tmp_path}/text*,{tmp_path}/none*,{tmp_path}/*,/dev/null",
                          "--input_text_file")
    with pytest.raises(InputFileError, match="^--input_file is empty: give comma-separated "
                                             "globs of text files$"):
        expand_text_files(" , ")
    # Thousands of shards of records given as text: the line names a few.
    for index in range(8):
        write_bytes(tmp_path / f"shard-{index}", records.read_bytes())
    with pytest.raises(InputFileError, match=(
            f"^--input_file: {re.escape(str(tmp_path))}/shard-0 is a TFRecord file .*; "
            f"{re.escape(str(tmp_path))}/shard-4 is a TFRecord file [^;]*; 3 more problems$")):
        expand_text_files(f"{tmp_path}/shard-*")


def test_each_text_file_is_opened_once_to_check_it_and_once_to_read_it(tmp_path, monkeypatch):
    # On gs://, a corpus of thousands of shards: the check opened each file three times (its
    # start for GZIP twice, then its first record), and reading it once more.
    files = [write_bytes(tmp_path / f"{i}.txt", b"One.\nTwo.\n\nThree.\n") for i in range(3)]
    opened, gfile = [], tf.io.gfile.GFile
    monkeypatch.setattr(tf.io.gfile, "GFile",
                        lambda name, mode="r": opened.append(name) or gfile(name, mode))
    assert expand_text_files(f"{tmp_path}/*.txt") == files
    assert opened == files
    chunks, _ = read_all(files)
    assert len(chunks[0]) == 6 and opened == files + files
