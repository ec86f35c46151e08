"""Prose to the pre-training text format: one sentence per line, a blank line between documents.

`create_pretraining_data.py` and the dynamic-masking reader take sentences as their units (a
segment A or B is a run of whole sentences, and next-sentence prediction is about sentence
boundaries), so text written as wrapped lines and paragraphs (books, docstrings) is first
re-cut into sentences. The splitter is a rule of thumb for English, not a linguistic one: a
sentence ends at `.`, `!` or `?` (with any closing quotes or brackets) followed by white space
and an upper-case letter or a digit, except after a few common abbreviations and initials
("Mr. Weston", "G. K. Chesterton").

Example:
    >>> split_sentences('He said "Stop!" Then Mr. Knightley left. It rained.')
    ['He said "Stop!"', 'Then Mr. Knightley left.', 'It rained.']
    >>> statistics = CorpusStatistics()   # bert_tf.data.pretraining.corpus
    >>> documents = [read_book("emma.txt", statistics)]
    >>> write_documents(documents, "corpus/train.txt")
"""

import os
import re

from bert_tf.data.pretraining.corpus import utf8_lines

_SENTENCE_END = re.compile(r"""[.!?]['")\]]*(?=\s+['"(\[]*[A-Z0-9])""")
# Words whose final period does not end a sentence (compared lower-cased, without the period).
_ABBREVIATIONS = frozenset(
    "mr mrs ms dr st jr sr prof rev gen col capt lt mt vs cf etc e.g i.e vol fig".split())


def split_sentences(text):
    """The sentences of a paragraph (white space normalised to single spaces)."""
    text = " ".join(text.split())
    sentences, start = [], 0
    for end in _SENTENCE_END.finditer(text):
        candidate = text[start:end.end()]
        last_word = candidate.rsplit(" ", 1)[-1].rstrip(".'\")]").lower()
        # "Mr." or an initial ("K.") continues the sentence.
        if last_word in _ABBREVIATIONS or (len(last_word) == 1 and last_word.isalpha()):
            continue
        sentences.append(candidate.strip())
        start = end.end()
    if text[start:].strip():
        sentences.append(text[start:].strip())
    return sentences


def paragraphs(lines):
    """Yields the paragraphs of `lines` (str): runs of non-blank lines joined by spaces."""
    paragraph = []
    for line in lines:
        if line.strip():
            paragraph.append(line.strip())
        elif paragraph:
            yield " ".join(paragraph)
            paragraph = []
    if paragraph:
        yield " ".join(paragraph)


def read_book(path, statistics):
    """One document (a list of sentences) from a plain-text book: wrapped lines, blank lines
    between paragraphs. Lines that are not valid UTF-8 are skipped and counted in
    `statistics.invalid_utf8_lines` (as `create_pretraining_data.py` does), bytes and lines
    read in `statistics.bytes` and `statistics.lines`."""
    lines = (line for line, _ in utf8_lines(path, statistics))
    return [sentence for paragraph in paragraphs(lines) for sentence in split_sentences(paragraph)]


def passages(documents, max_sentences):
    """Each document cut into passages of at most `max_sentences` sentences (a book is too
    coarse a unit to hold out, or to draw "another document" from, with few books)."""
    for document in documents:
        for start in range(0, len(document), max_sentences):
            yield document[start:start + max_sentences]


def write_documents(documents, path):
    """Writes `documents` (lists of sentences) to `path` in the pre-training text format; the
    file appears complete or not at all. Returns the number of documents written."""
    temporary = f"{path}.incomplete"
    count = 0
    with open(temporary, "w", encoding="utf-8", newline="\n") as f:
        for document in documents:
            if count:
                f.write("\n")
            # A sentence must stay one line: the format's line breaks are its boundaries.
            f.writelines(" ".join(sentence.split()) + "\n" for sentence in document)
            count += 1
    os.replace(temporary, path)
    return count

