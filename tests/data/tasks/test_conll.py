"""Reading CoNLL-2003 files: sentences, documents, label lists, and errors naming file:line."""

import pytest

from bert_tf.data.tasks.conll import (ConllFormatError, label_list, read_conll, read_label_list,
                                tag_ids, tags_not_in, write_conll_predictions,
                                write_label_list)
from tests.resources import shared_data_path

CONLL = """-DOCSTART- -X- -X- O

EU NNP B-NP B-ORG
rejects VBZ B-VP O
German JJ B-NP B-MISC

Peter NNP B-NP B-PER
Blackburn NNP I-NP I-PER
-DOCSTART- -X- -X- O

BRUSSELS NNP B-NP B-LOC
"""


def write(tmp_path, text, name="train.txt", encoding="utf-8"):
    path = tmp_path / name
    path.write_bytes(text.encode(encoding))
    return str(path)


def test_sentences_documents_and_lines(tmp_path):
    # No blank line before the second -DOCSTART-: it ends the sentence all the same.
    sentences = read_conll(write(tmp_path, CONLL + "\n\n"))
    assert [s.words for s in sentences] == [["EU", "rejects", "German"],
                                            ["Peter", "Blackburn"], ["BRUSSELS"]]
    assert [s.tags for s in sentences] == [["B-ORG", "O", "B-MISC"], ["B-PER", "I-PER"],
                                           ["B-LOC"]]
    assert [s.first_line for s in sentences] == [3, 7, 11]
    assert [s.starts_document for s in sentences] == [True, False, True]
    assert sentences[0].rows[1] == ["rejects", "VBZ", "B-VP", "O"]


def test_windows_line_endings_and_words_only_files(tmp_path):
    sentences = read_conll(write(tmp_path, "A B-PER\r\nb O\r\n\r\nc O\r\n"))
    assert [s.words for s in sentences] == [["A", "b"], ["c"]]
    words_only = read_conll(write(tmp_path, "Hello\nworld\n\nagain\n", "test.txt"))
    assert [s.words for s in words_only] == [["Hello", "world"], ["again"]]
    assert words_only[0].tags is None
    with pytest.raises(ConllFormatError, match=r"test.txt:1: the file has a single column"):
        label_list(words_only, str(tmp_path / "test.txt"))


def test_label_list_o_first_then_by_type(tmp_path):
    path = write(tmp_path, "a I-PER\nb B-ORG\nc O\nd I-ORG\ne B-PER\n")
    labels = label_list(read_conll(path), path)
    assert labels == ["O", "B-ORG", "I-ORG", "B-PER", "I-PER"]
    write_label_list(str(tmp_path / "labels.txt"), labels)
    assert read_label_list(str(tmp_path / "labels.txt")) == labels
    assert tag_ids(read_conll(path), labels, path) == [[4, 1, 0, 2, 3]]


def test_bad_input_names_file_and_line(tmp_path):
    wrong_columns = write(tmp_path, "EU NNP B-NP B-ORG\nrejects VBZ O\n", "a.txt")
    with pytest.raises(ConllFormatError, match=r"a.txt:2: 3 column\(s\) .* rows have 4"):
        read_conll(wrong_columns)
    bad_tag = write(tmp_path, "EU B-ORG\n\nrejects PER\n", "b.txt")
    with pytest.raises(ConllFormatError, match=r"b.txt:3: Invalid tag 'PER'"):
        label_list(read_conll(bad_tag), bad_tag)
    unknown = write(tmp_path, "EU B-ORG\n\nthe O\nrejects B-PER\n", "c.txt")
    with pytest.raises(ConllFormatError, match=r"c.txt:4: tag 'B-PER' is not one of"):
        tag_ids(read_conll(unknown), ["O", "B-ORG"], unknown)
    # Evaluation reads such a file: the tags the model lacks, each at its first row.
    unknown = write(tmp_path, "EU B-ORG\nrejects B-PER\n\nthe B-PER\nLondon B-LOC\n", "c.txt")
    assert tags_not_in(["O", "B-ORG"], read_conll(unknown), unknown) == [
        f"{unknown}:2: 'B-PER'", f"{unknown}:5: 'B-LOC'"]
    with pytest.raises(ConllFormatError, match=r"b.txt:3: Invalid tag 'PER'"):
        tags_not_in(["O", "B-ORG"], read_conll(bad_tag), bad_tag)
    latin1 = write(tmp_path, "Café B-LOC\n", "d.txt", encoding="latin-1")
    with pytest.raises(ConllFormatError, match=r"d.txt:1: not utf-8 text.*--conll_encoding"):
        read_conll(latin1)
    assert read_conll(latin1, encoding="latin-1")[0].words == ["Café"]
    with pytest.raises(ConllFormatError, match=r"e.txt: no sentences"):
        read_conll(write(tmp_path, "-DOCSTART- -X- -X- O\n\n", "e.txt"))


def test_predictions_round_trip(tmp_path):
    path = write(tmp_path, CONLL.replace("I-PER\n-DOC", "I-PER\n\n-DOC"))
    sentences = read_conll(path)
    predicted = [["B-ORG", "O", "O"], ["B-PER", "I-PER"], ["B-ORG"]]
    output = str(tmp_path / "predictions.txt")
    write_conll_predictions(output, sentences, predicted)
    written = read_conll(output)
    assert [s.words for s in written] == [s.words for s in sentences]
    assert [s.tags for s in written] == predicted
    assert [[row[-2] for row in s.rows] for s in written] == [s.tags for s in sentences]
    assert [s.starts_document for s in written] == [True, False, True]
    # Every row as wide as the others, document starts too: conlleval refused the file
    # ("unexpected number of features: 5 (4)").
    lines = [line.split() for line in open(output, encoding="utf-8") if line.strip()]
    assert {len(line) for line in lines} == {5}
    assert lines[0] == ["-DOCSTART-", "-X-", "-X-", "O", "O"]


@pytest.mark.parametrize("width", [1, 2, 4])
def test_a_document_start_is_written_as_wide_as_the_rows(tmp_path, width):
    rows = ["EU" + " NNP" * (width - 2) + " B-ORG" * (width > 1), "rejects" + " x" * (width - 1)]
    path = write(tmp_path, "-DOCSTART-\n\n" + "\n".join(rows) + "\n")
    output = str(tmp_path / "predictions.txt")
    write_conll_predictions(output, read_conll(path), [["B-ORG", "O"]])
    lines = [line.split() for line in open(output, encoding="utf-8") if line.strip()]
    assert [len(line) for line in lines] == [width + 1] * 3
    assert lines[0][0] == "-DOCSTART-" and lines[0][-1] == "O"


def test_a_byte_order_mark_is_not_read_as_a_word(tmp_path):
    path = tmp_path / "bom.txt"
    path.write_bytes(b"\xef\xbb\xbf" + CONLL.encode())
    with_mark, without = read_conll(str(path)), read_conll(write(tmp_path, CONLL, "plain.txt"))
    assert [s.rows for s in with_mark] == [s.rows for s in without]
    assert with_mark[0].starts_document


def test_real_conll2003_files():
    path = shared_data_path("conll2003/valid.txt")
    sentences = read_conll(path)
    assert len(sentences) == 3250
    assert sum(s.starts_document for s in sentences) == 216
    assert label_list(sentences, path) == ["O", "B-LOC", "I-LOC", "B-MISC", "I-MISC", "B-ORG",
                                           "I-ORG", "B-PER", "I-PER"]
