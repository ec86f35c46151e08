"""Reading pre-training text in bounded chunks of whole documents, counting what is skipped.

The input format is the original's: one sentence per line (real sentences: they are the units
A and B are made of, and next-sentence prediction is about sentence boundaries), blank lines
between documents (so that no A/B pair spans two documents). Unlike the original, the end of
a file also ends a document: text from two files never forms one sequence.

Google's script reads the whole corpus into memory, because a random next sentence may come
from any document. Here the files are streamed and cut into chunks of about
`max_chunk_bytes` of text, never inside a document; each chunk is turned into instances on
its own, with random next sentences drawn from the chunk's other documents. Memory is bounded
by the chunk size (or the largest document), whatever the corpus size; with chunks of
thousands of documents the choice of "another document" is as random as in the original.

Lines that are not valid UTF-8 are skipped (the original silently drops their bad bytes,
which can glue words together) and counted per file, so that a file in another encoding is
noticed.

Example:
    >>> statistics = CorpusStatistics()
    >>> for chunk in read_document_chunks(["wiki-1.txt", "wiki-2.txt"], 8 << 20, statistics):
    ...     print(len(chunk), "documents; first sentence:", chunk[0][0])
    >>> print(statistics.report())
"""

import codecs
import collections
import zlib

import tensorflow as tf

from bert_tf.data.pretraining.records_dataset import (GZIP_MAGIC, InputFileError,
                                                      expand_input_files)
from bert_tf.op_errors import bare_message

# A TFRecord file starts with its first record's length (8 bytes) and that length's masked
# CRC-32C (4 bytes; the mask is TensorFlow's constant).
_RECORD_HEADER_BYTES = 12
_CRC_MASK_DELTA = 0xA282EAD8
# Enough of a GZIP file for its header (with a file name) and the compressed start of a record.
_START_BYTES = 4096
# zlib's window bits for a GZIP stream (16 + the deflate window).
_GZIP_WBITS = 31
# The byte order marks of UTF-16, little and big endian (UTF-32's start with them too); UTF-8
# text never starts with these bytes.
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
_CONVERT_TO_UTF8 = "convert the text to UTF-8 (e.g. iconv -f latin1 -t utf-8)"
# What `invalid_utf8_at_start` reads: the first MB of each of the first 16 files (at most 16
# MB, seconds from a bucket). A file in another encoding (latin-1, cp1252) shows it in its
# first lines: any accented letter is a byte that is not UTF-8.
_SAMPLED_BYTES = 1 << 20
_SAMPLED_FILES = 16


class CorpusStatistics:
    """Counts of the text read, of the instances made from it, and of what was skipped.

    Reading counts `files`, `bytes`, `lines` and `invalid_utf8_lines` (per file); turning
    documents into instances counts `documents` and `sentences` used, `lines_without_tokens`
    (nothing left after tokenization, e.g. only control characters), `empty_documents`
    (documents with no token at all), `long_lines` (longer than a sequence) with their
    `long_line_pieces` and, when they are truncated rather than cut, their
    `pieces_beyond_a_sequence`, and `instances`. `merge` adds counts from another process.
    """

    _COUNTS = ("files", "bytes", "lines", "documents", "sentences", "lines_without_tokens",
               "empty_documents", "long_lines", "long_line_pieces", "pieces_beyond_a_sequence",
               "instances")

    def __init__(self):
        for name in self._COUNTS:
            setattr(self, name, 0)
        self.invalid_utf8_lines = collections.Counter()

    def merge(self, other):
        for name in self._COUNTS:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.invalid_utf8_lines.update(other.invalid_utf8_lines)

    @property
    def skipped_lines(self):
        return sum(self.invalid_utf8_lines.values()) + self.lines_without_tokens

    def invalid_utf8_report(self):
        """A line for each file that had lines that are not valid UTF-8, naming it."""
        return [f"  {path}: {count:,} lines skipped, not valid UTF-8"
                for path, count in sorted(self.invalid_utf8_lines.items())]

    def invalid_utf8_advice(self):
        """What to do about the lines that were not valid UTF-8 (to end a message that nothing
        could be made of the text), or "" when all were.

        Example:
            >>> statistics.invalid_utf8_advice()
            '; 3 lines are not valid UTF-8: convert the text to UTF-8 (e.g. iconv -f latin1 -t
            utf-8)'
        """
        invalid = sum(self.invalid_utf8_lines.values())
        return f"; {invalid:,} lines are not valid UTF-8: {_CONVERT_TO_UTF8}" if invalid else ""

    def report(self):
        """A human-readable summary, naming each file that had invalid UTF-8."""
        lines = [f"Read {self.files} files, {self.lines:,} lines ({self.bytes:,} bytes): "
                 f"{self.documents:,} documents, {self.sentences:,} sentences, "
                 f"{self.instances:,} instances.",
                 f"Skipped {self.skipped_lines:,} lines and {self.empty_documents:,} empty "
                 f"documents."]
        lines += self.invalid_utf8_report()
        if self.lines_without_tokens:
            lines.append(f"  {self.lines_without_tokens:,} lines skipped, no tokens after "
                         f"tokenization")
        if self.empty_documents:
            lines.append(f"  {self.empty_documents:,} documents skipped, no tokens")
        if self.long_lines and self.pieces_beyond_a_sequence:
            lines.append(f"Truncated {self.long_lines:,} lines longer than a sequence, as the "
                         f"original does: an instance keeps at most a sequence of such a line "
                         f"({self.pieces_beyond_a_sequence:,} of their "
                         f"{self.long_line_pieces:,} pieces do not fit); split such text into "
                         f"sentences, one per line, or cut such lines into pieces of half a "
                         f"sequence (create_pretraining_data --cut_long_lines).")
        elif self.long_lines:
            lines.append(f"Cut {self.long_lines:,} lines longer than a sequence into pieces of "
                         f"half a sequence, paired as sentences: split such text into "
                         f"sentences, one per line, for pairs that break at sentence ends.")
        return "\n".join(lines)


def read_document_chunks(files, max_chunk_bytes, statistics, read_lines=None):
    """Yields the documents of `files` in chunks: lists of documents, each a list of its
    stripped, non-empty lines (str), with at least `max_chunk_bytes` of text and two documents
    per chunk except when the whole input has fewer. Counts into `statistics` as it reads; a
    file that cannot be read is an `InputFileError` naming it. `read_lines(path, statistics)`
    yields a file's `(line, size)` (default `utf8_lines`; `bert_tf.data.tfds.pretraining_text`
    reads TFDS shards).

    Two documents at least: a chunk is the pool random next sentences come from, and in a chunk
    of one document every "random next" segment came from that document, labelled as if not
    (`--chunk_size_mb=0`, or any chunk size below a document's: 169 of 169 such instances in a
    40-document test). So the last chunk joins the one before when it holds one document."""
    ready, chunk, chunk_bytes = None, [], 0
    for document, size in _documents(files, statistics, read_lines or utf8_lines):
        chunk.append(document)
        chunk_bytes += size
        if chunk_bytes >= max_chunk_bytes and len(chunk) >= 2:
            if ready:
                yield ready
            ready, chunk, chunk_bytes = chunk, [], 0
    if ready and len(chunk) < 2:
        ready, chunk = ready + chunk, []
    for last in (ready, chunk):
        if last:
            yield last


def _documents(files, statistics, read_lines):
    """`(document, bytes of its lines)` of `files` in order: a document is a list of stripped,
    non-empty lines; blank lines and the ends of files end documents."""
    for path in files:
        document, document_bytes = [], 0
        for line, size in read_lines(path, statistics):
            line = line.strip()  # Python's strip(), as the original: Unicode whitespace too.
            if line:
                document.append(line)
                document_bytes += size
                continue
            if document:
                yield document, document_bytes
                document, document_bytes = [], 0
        if document:
            yield document, document_bytes


def file_names(files, shown=3, separator=", "):
    """`files` named in a message, the first `shown` of them, between `separator`s.

    Example:
        >>> file_names(["a.txt", "b.txt", "c.txt", "d.txt", "e.txt"])
        'a.txt, b.txt, c.txt and 2 more files'
    """
    more = len(files) - shown
    return separator.join(files[:shown]) + (f" and {more} more files" if more > 0 else "")


def input_bytes(files):
    """The total size of `files` in bytes (for progress)."""
    return sum(tf.io.gfile.stat(path).length for path in files)


def expand_text_files(patterns, flag="--input_file"):
    """The sorted text files matching comma-separated glob `patterns`: `expand_input_files`,
    naming also every file that cannot be read or is no text (`text_file_problem`). This reads
    each file's first bytes, once: `dynamic_masking_dataset` trusts the list (`utf8_lines`
    checks the bytes it reads anyway).

    Example:
        >>> expand_text_files("corpus/*.txt,data/train.tfrecord")
        InputFileError: --input_file: data/train.tfrecord is a TFRecord file (pre-training
        records?), not text: give records to run_pretraining's --input_file
    """
    return expand_input_files(patterns, flag, "text files", lambda files: [
        problem for problem in map(text_file_problem, files) if problem])


def text_file_problem(path):
    """What keeps the file `path` from being read as text, in words that start with it, or
    None: it cannot be read, or it holds pre-training records (a TFRecord file, GZIP or not)
    or GZIP-compressed data, or UTF-16 text (a "Unicode" text file of Windows), or other
    binary data (an image, an archive, model weights). Read as text, the few lines of binary
    data that happen to be valid UTF-8 would make examples, or a vocabulary, of garbage,
    silently; read as UTF-8, each line of UTF-16 holds NUL bytes and a blank one is not blank.

    Example:
        >>> text_file_problem("data/train.tfrecord")
        "data/train.tfrecord is a TFRecord file (pre-training records?), not text: give
        records to run_pretraining's --input_file"
    """
    try:
        with tf.io.gfile.GFile(path, "rb") as reader:
            return _start_problem(path, reader.read(_START_BYTES))
    except (OSError, tf.errors.OpError) as error:
        return _unreadable(path, error)


def utf8_lines(path, statistics):
    """Yields `(line, size)` for each line of `path` that is UTF-8 text: the decoded line (with
    its line break) and its size in bytes. Counts the file, lines and bytes into `statistics`;
    a line that is not UTF-8 is skipped and counted in `statistics.invalid_utf8_lines` (real
    corpora hold a few; the original tool would crash), a file that cannot be read is an
    `InputFileError` naming it, and so is one that is no text (`text_file_problem`, checked on
    the bytes read anyway)."""
    try:
        with tf.io.gfile.GFile(path, "rb") as reader:
            problem = _start_problem(path, reader.read(_START_BYTES))
            if problem:
                raise InputFileError(problem)
            reader.seek(0)  # within the reader's buffer: no second read
            statistics.files += 1
            for raw_line in reader:
                statistics.lines += 1
                statistics.bytes += len(raw_line)
                try:
                    line = raw_line.decode("utf-8")
                except UnicodeDecodeError:
                    statistics.invalid_utf8_lines[path] += 1
                    continue
                yield line, len(raw_line)
    except (OSError, tf.errors.OpError) as error:
        raise InputFileError(_unreadable(path, error)) from error


def invalid_utf8_at_start(files, sampled_bytes=_SAMPLED_BYTES, sampled_files=_SAMPLED_FILES):
    """A message naming the files, of the first `sampled_files` of `files`, whose first
    `sampled_bytes` hold lines that are not valid UTF-8, with their counts; None when none do.
    For readers that skip such lines as they stream the text (`dynamic_masking_dataset`) and
    so cannot count them as `utf8_lines` does: read before a job starts, it says that a file
    is in another encoding before hours of training skip its lines. Files that cannot be read
    are left to the reader to name.

    Example:
        >>> invalid_utf8_at_start(["fr.txt", "en.txt"])
        'lines that are not valid UTF-8 are skipped: fr.txt: 312 of 4,210 lines read;
        convert the text to UTF-8 (e.g. iconv -f latin1 -t utf-8)'
    """
    found = []
    for path in files[:sampled_files]:
        try:
            with tf.io.gfile.GFile(path, "rb") as reader:
                start = reader.read(sampled_bytes)
        except (OSError, tf.errors.OpError):
            continue
        lines = start.split(b"\n")
        if lines[-1] == b"" or len(start) == sampled_bytes:
            lines.pop()  # what follows the last line break: nothing, or a line the read may cut
        invalid = sum(1 for line in lines if not _is_utf8(line))
        if invalid:
            found.append(f"{path}: {invalid:,} of {len(lines):,} lines read")
    if not found:
        return None
    return (f"lines that are not valid UTF-8 are skipped: {file_names(found, separator='; ')}; "
            f"{_CONVERT_TO_UTF8}")


def _is_utf8(raw_line):
    try:
        raw_line.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _unreadable(path, error):
    return f"{path}: cannot read the text file ({bare_message(error)})"


def _start_problem(path, start):
    """`text_file_problem` of the file `path` that starts with the bytes `start`."""
    compressed = start.startswith(GZIP_MAGIC)
    if compressed:
        try:
            start = zlib.decompressobj(wbits=_GZIP_WBITS).decompress(start, _RECORD_HEADER_BYTES)
        except zlib.error:
            start = b""
    if _is_record_header(start):
        return (f"{path} is a TFRecord file (pre-training records?), not text: give records to "
                f"run_pretraining's --input_file")
    if compressed:
        return f"{path} is GZIP-compressed, not text: decompress it (gunzip)"
    if start.startswith(_UTF16_BOMS):
        return (f"{path} is UTF-16 text (it starts with a byte order mark), not UTF-8: convert "
                f"it (e.g. iconv -f utf-16 -t utf-8)")
    # Text in any 8-bit encoding (Latin-1, GB2312, ...) has no NUL byte, and UTF-8 text with
    # some (a padded file's end) decodes: binary formats have both within their first bytes.
    if b"\0" in start and not _decodes_as_utf8(start):
        return (f"{path} is binary data (NUL bytes and bytes that are not UTF-8), not text: "
                f"give text files, one sentence per line")
    return None


def _decodes_as_utf8(start):
    """Whether `start`, the first bytes of a file, is UTF-8 (its last character may be cut)."""
    try:
        codecs.getincrementaldecoder("utf-8")().decode(start, final=False)
    except UnicodeDecodeError:
        return False
    return True


def _is_record_header(start):
    """Whether `start` begins as a TFRecord file does: the first record's length (uint64,
    little-endian) and its masked CRC-32C, which the start of a text matches by a chance of
    one in 2**32."""
    if len(start) < _RECORD_HEADER_BYTES:
        return False
    crc = _crc32c(start[:8])
    masked = (((crc >> 15) | (crc << 17)) + _CRC_MASK_DELTA) & 0xFFFFFFFF
    return int.from_bytes(start[8:_RECORD_HEADER_BYTES], "little") == masked


def _crc32c(data):
    """CRC-32C (Castagnoli) of a few bytes, bit by bit (TensorFlow's is not exposed)."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 & -(crc & 1))
    return crc ^ 0xFFFFFFFF
