"""Prose (books, docstrings) to the pre-training text format."""

import pytest

from bert_tf.data.pretraining.corpus import CorpusStatistics, read_document_chunks
from bert_tf.data.pretraining.prose import (paragraphs, passages, read_book, split_sentences,
                                write_documents)


@pytest.mark.parametrize("text, sentences", [
    ("It rained.  The end!", ["It rained.", "The end!"]),
    ('He said "Stop!" Then Mr. Knightley left. 3 men came?  (Yes.) "No," said G. K. Chesterton.',
     ['He said "Stop!"', "Then Mr. Knightley left.", "3 men came?", "(Yes.)",
      '"No," said G. K. Chesterton.']),
    ("Use e.g. Python 3. lower case goes on: x. y", ["Use e.g. Python 3. lower case goes on: "
                                                    "x. y"]),
    ("wrapped\nlines\tand   spaces", ["wrapped lines and spaces"]),
    ("", []),
])
def test_split_sentences(text, sentences):
    assert split_sentences(text) == sentences


def test_paragraphs_join_wrapped_lines():
    lines = ["", "First line", "  continues.  ", " ", "Second.", "", "", "Third"]
    assert list(paragraphs(lines)) == ["First line continues.", "Second.", "Third"]


def test_a_book_is_one_document_and_bad_lines_are_counted(tmp_path):
    book = tmp_path / "book.txt"
    book.write_bytes(b"CHAPTER I\n\nEmma Woodhouse, handsome,\nclever. She was rich.\n"
                     b"Un caf\xe9 noir.\n\n\"Poor Miss Taylor!\" said he.\n")
    statistics = CorpusStatistics()
    assert read_book(str(book), statistics) == [
        "CHAPTER I", "Emma Woodhouse, handsome, clever.", "She was rich.",
        '"Poor Miss Taylor!" said he.']
    assert statistics.invalid_utf8_lines == {str(book): 1}
    assert (statistics.files, statistics.lines) == (1, 7)


def test_written_documents_read_back_as_documents(tmp_path):
    documents = [["One  sentence.", "Two\nlines."], ["Alone."], ["A.", "B.", "C."]]
    path = str(tmp_path / "corpus.txt")
    assert write_documents(documents, path) == 3
    assert open(path, encoding="utf-8").read() == (
        "One sentence.\nTwo lines.\n\nAlone.\n\nA.\nB.\nC.\n")
    chunks = list(read_document_chunks([path], 1 << 20, CorpusStatistics()))
    assert chunks == [[["One sentence.", "Two lines."], ["Alone."], ["A.", "B.", "C."]]]
    assert not (tmp_path / "corpus.txt.incomplete").exists()


def test_passages_cut_long_documents():
    assert list(passages([list("abcde"), ["f"]], 2)) == [["a", "b"], ["c", "d"], ["e"], ["f"]]
