"""Reading and writing CoNLL-2003 named-entity files.

The format: one word per line with whitespace-separated columns, the tag last
(`EU NNP B-NP B-ORG`: word, part of speech, chunk, named entity), a blank line between
sentences, and `-DOCSTART-` lines between documents. The tags may be IOB1 (the original
CoNLL-2003 release) or IOB2 (the common re-release); they are kept as found, and the label list
is whatever tags the training file uses. A file for prediction may have the word column only.

Every malformed line is an error naming `file:line` (`ConllFormatError`): a row whose column
count differs from the file's first row, a tag that is not IOB/IOBES, an undecodable byte, a
tag the model does not know.

Example:
    >>> sentences = read_conll("conll2003/train.txt")
    >>> sentences[0].words, sentences[0].tags
    (['EU', 'rejects', 'German', ...], ['B-ORG', 'O', 'B-MISC', ...])
    >>> labels = label_list(sentences, "conll2003/train.txt")     # ['O', 'B-LOC', ...]
    >>> write_conll_predictions("predictions.txt", sentences, predicted_tags)
"""

import codecs
import collections

from bert_tf.metrics.sequence_labeling import get_entities

DOCUMENT_START = "-DOCSTART-"
OUTSIDE = "O"


class ConllFormatError(ValueError):
    """A CoNLL file that cannot be read as asked; the message names the file and line."""


class Sentence(collections.namedtuple("Sentence", "rows first_line starts_document")):
    """One sentence of a CoNLL file.

    rows: the column lists of its words, as in the file.
    first_line: 1-based line number of its first word (word i is on line `first_line + i`).
    starts_document: whether a `-DOCSTART-` line came before it (kept when writing predictions).
    """

    @property
    def words(self):
        return [row[0] for row in self.rows]

    @property
    def tags(self):
        """The last column, or None for a word-only file."""
        return [row[-1] for row in self.rows] if len(self.rows[0]) > 1 else None

    def line(self, word_index):
        return self.first_line + word_index


def read_conll(path, encoding="utf-8"):
    """The sentences of the CoNLL file `path`, in order. Every row must have as many columns as
    the file's first row. Raises `ConllFormatError` naming `path:line`."""
    with open(path, "rb") as f:
        data = f.read()
    if codecs.lookup(encoding).name == "utf-8":
        data = data.removeprefix(codecs.BOM_UTF8)  # as Windows editors start a file
    sentences, rows = [], []
    first_line, starts_document, num_columns = None, False, None
    for line_number, raw_line in enumerate(data.splitlines(), start=1):
        try:
            line = raw_line.decode(encoding)
        except UnicodeDecodeError as error:
            raise ConllFormatError(
                f"{path}:{line_number}: not {encoding} text ({error.reason} at byte "
                f"{error.start}); give the file's encoding, e.g. --conll_encoding=latin-1"
            ) from None
        columns = line.split()
        is_document_start = bool(columns) and columns[0] == DOCUMENT_START
        if not columns or is_document_start:
            # A document start ends a sentence even without a blank line before it.
            if rows:
                sentences.append(Sentence(rows, first_line, starts_document))
                rows, starts_document = [], False
            starts_document = starts_document or is_document_start
            continue
        if num_columns is None:
            num_columns = len(columns)
        elif len(columns) != num_columns:
            raise ConllFormatError(
                f"{path}:{line_number}: {len(columns)} column(s) {columns!r}, but the file's "
                f"rows have {num_columns} (word ... tag, whitespace-separated)")
        if not rows:
            first_line = line_number
        rows.append(columns)
    if rows:
        sentences.append(Sentence(rows, first_line, starts_document))
    if not sentences:
        raise ConllFormatError(f"{path}: no sentences (an empty file, or only {DOCUMENT_START} "
                               f"lines)")
    return sentences


def _require_tags(sentences, path):
    if sentences[0].tags is None:
        raise ConllFormatError(f"{path}:{sentences[0].first_line}: the file has a single column "
                               f"(words only); it needs a last column with the entity tags")


def _first_lines(sentences, path):
    """`{tag: line of its first row}` over `sentences` (read from `path`), in the order first
    seen. Raises `ConllFormatError` when the file has no tag column, or at the first row with a
    tag that is not IOB/IOBES."""
    _require_tags(sentences, path)
    first_seen = {}
    for sentence in sentences:
        for index, tag in enumerate(sentence.tags):
            first_seen.setdefault(tag, sentence.line(index))
    for tag, line_number in first_seen.items():
        try:
            get_entities([[tag]])
        except ValueError as error:
            raise ConllFormatError(f"{path}:{line_number}: {error}") from None
    return first_seen


def label_list(sentences, path):
    """The tags used in `sentences` (read from `path`), "O" first then sorted: the model's
    classes. Raises `ConllFormatError` at the first row with a tag that is not IOB/IOBES."""
    return sorted(_first_lines(sentences, path), key=lambda tag: (tag != OUTSIDE, tag[2:], tag))


def tags_not_in(labels, sentences, path):
    """`path:line: tag` of the first row of each tag of `sentences` (read from `path`) that is
    not in `labels`, in the order first seen. Raises `ConllFormatError` as `label_list` does.

    Example (evaluation data with a type the training data never had):
        >>> tags_not_in(["O", "B-PER"], read_conll("valid.txt"), "valid.txt")
        ["valid.txt:3: 'B-MISC'"]
    """
    return [f"{path}:{line_number}: {tag!r}"
            for tag, line_number in _first_lines(sentences, path).items() if tag not in labels]


def tag_ids(sentences, labels, path):
    """`[sentence][word]` class ids of the tags of `sentences` (read from `path`) under the
    label list `labels`. Raises `ConllFormatError` naming `path:line` at a tag not in `labels`."""
    _require_tags(sentences, path)
    index = {tag: i for i, tag in enumerate(labels)}
    ids = []
    for sentence in sentences:
        for word_index, tag in enumerate(sentence.tags):
            if tag not in index:
                raise ConllFormatError(
                    f"{path}:{sentence.line(word_index)}: tag {tag!r} is not one of the "
                    f"model's labels {labels}")
        ids.append([index[tag] for tag in sentence.tags])
    return ids


# The file of a token classifier's labels, in class order, beside its checkpoints: run_ner
# writes it, evaluation, prediction and the NER export read it.
LABEL_LIST_FILE = "label_list.txt"


def write_label_list(path, labels):
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(labels) + "\n")


def read_label_list(path):
    with open(path, encoding="utf-8") as f:
        return [line.strip() for line in f if line.strip()]


def write_conll_predictions(path, sentences, predicted_tags):
    """Writes `sentences` back in CoNLL format with the predicted tag appended to every row
    (`word POS chunk gold predicted`: what `conlleval` reads), documents and sentences
    separated as in the input. A document start is written as wide as its sentence's rows,
    tagged `O` (`-DOCSTART- -X- -X- O O`): conlleval refuses a file whose rows differ in width."""
    with open(path, "w", encoding="utf-8") as f:
        for sentence, tags in zip(sentences, predicted_tags, strict=True):
            if sentence.starts_document:
                width = len(sentence.rows[0])
                row = [DOCUMENT_START] + ["-X-"] * (width - 2) + [OUTSIDE] * (width > 1)
                f.write(" ".join(row + [OUTSIDE]) + "\n\n")
            for row, tag in zip(sentence.rows, tags, strict=True):
                f.write(" ".join(row + [tag]) + "\n")
            f.write("\n")
