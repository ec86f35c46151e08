"""Reading GLUE TSVs: Google's column choices on the real files, every task's format, bad input
named by file, line and column."""

import csv

import numpy as np
import pytest

from bert_tf.data.tasks.glue import read_glue_tsv
from bert_tf.data.tasks.glue_tasks import GLUE_TASKS, glue_task
from tests.resources import shared_data_path


def write_tsv(path, rows, encoding="utf-8"):
    path.write_bytes("".join("\t".join(row) + "\n" for row in rows).encode(encoding))
    return str(path)


def googles_rows(path):
    """The file's rows as Google's `DataProcessor._read_tsv` reads them: csv with tab
    delimiter and no quote character."""
    with open(path, encoding="utf-8-sig") as f:
        return list(csv.reader(f, delimiter="\t", quotechar=None))


# Google's processors: (text_a, text_b, label) column positions, whether row 0 is a header.
GOOGLES_COLUMNS = {"SST-2": (0, None, 1, True), "MRPC": (3, 4, 0, True),
                   "CoLA": (3, None, 1, False), "RTE": (1, 2, -1, True)}


@pytest.mark.parametrize("task_name", sorted(GOOGLES_COLUMNS))
@pytest.mark.parametrize("split", ["train", "dev"])
def test_real_files_read_as_googles_processors(task_name, split):
    path = shared_data_path(f"{task_name}/{split}.tsv")
    task = glue_task(task_name)
    examples = read_glue_tsv(path, task)
    text_a, text_b, label, header = GOOGLES_COLUMNS[task_name]
    rows = googles_rows(path)[1 if header else 0:]
    assert len(examples) == len(rows) and not examples.skipped
    assert examples.texts[0] == [row[text_a] for row in rows]
    if text_b is not None:
        assert examples.texts[1] == [row[text_b] for row in rows]
    assert len(examples.texts) == (1 if text_b is None else 2)
    assert examples.labels.dtype == np.int32
    assert [task.label_names[i] for i in examples.labels] == [row[label] for row in rows]
    assert examples.lines[0] == (2 if header else 1)


def test_quotes_and_byte_order_mark_are_kept_as_text():
    # MRPC starts with a UTF-8 BOM, and its second dev sentence opens a quote it never closes:
    # quote processing would swallow the following lines.
    examples = read_glue_tsv(shared_data_path("MRPC/dev.tsv"), glue_task("MRPC"))
    assert len(examples) == 408
    assert examples.texts[1][0] == ('"The foodservice pie business does not fit our long-term '
                                    'growth strategy.')
    assert examples.labels[:2].tolist() == [1, 0]


# One labelled and one test file per task, with GLUE's real headers.
FORMATS = {
    "SST-2": ([["sentence", "label"], ["a fine film ", "1"], ["dull", "0"]],
              [["index", "sentence"], ["0", "a fine film"], ["1", "dull"]]),
    "CoLA": ([["gj04", "1", "", "The book was read."], ["gj04", "0", "*", "Book the read was."]],
             [["index", "sentence"], ["0", "The book was read."], ["1", "Read."]]),
    "MRPC": ([["\ufeffQuality", "#1 ID", "#2 ID", "#1 String", "#2 String"],
              ["1", "11", "12", "He said so.", "\"He did say so."],
              ["0", "21", "22", "It rained.", "It was sunny."]],
             [["index", "#1 ID", "#2 ID", "#1 String", "#2 String"],
              ["0", "31", "32", "Yes.", "No."], ["1", "41", "42", "One.", "Two."]]),
    "QQP": ([["id", "qid1", "qid2", "question1", "question2", "is_duplicate"],
             ["7", "1", "2", "How?", "Why?", "0"], ["8", "3", "4", "Who?", "Who is?", "1"]],
            [["id", "question1", "question2"], ["0", "How?", "Why?"], ["1", "Who?", "Whom?"]]),
    "STS-B": ([["index", "genre", "filename", "year", "old_index", "source1", "source2",
                "sentence1", "sentence2", "score"],
               ["0", "main-captions", "MSRvid", "2012test", "0001", "none", "none",
                "A plane is taking off.", "An air plane is taking off.", "5.000"],
               ["1", "main-captions", "MSRvid", "2012test", "0004", "none", "none",
                "A man plays.", "A dog sleeps.", "0.25"]],
              [["index", "genre", "filename", "year", "old_index", "source1", "source2",
                "sentence1", "sentence2"],
               ["0", "main-news", "headlines", "2015", "0001", "none", "none", "A.", "B."],
               ["1", "main-news", "headlines", "2015", "0002", "none", "none", "C.", "D."]]),
    "MNLI": ([["index", "promptID", "pairID", "genre", "sentence1_binary_parse",
               "sentence2_binary_parse", "sentence1_parse", "sentence2_parse", "sentence1",
               "sentence2", "label1", "gold_label"],
              ["0", "31193", "31193n", "government", "( x )", "( y )", "(ROOT x)", "(ROOT y)",
               "Conceptually cream skimming has two dimensions.", "Product and geography.",
               "neutral", "neutral"],
              ["1", "101457", "101457e", "telephone", "( x )", "( y )", "(ROOT x)", "(ROOT y)",
               "you know during the season", "You lose the things.", "entailment",
               "entailment"]],
             [["index", "promptID", "pairID", "genre", "sentence1_binary_parse",
               "sentence2_binary_parse", "sentence1_parse", "sentence2_parse", "sentence1",
               "sentence2"],
              ["0", "1", "1n", "slate", "( x )", "( y )", "(ROOT x)", "(ROOT y)", "P.", "H."],
              ["1", "2", "2n", "slate", "( x )", "( y )", "(ROOT x)", "(ROOT y)", "Q.", "I."]]),
    "QNLI": ([["index", "question", "sentence", "label"],
              ["0", "When?", "In 1990.", "entailment"], ["1", "Who?", "Nobody.",
                                                         "not_entailment"]],
             [["index", "question", "sentence"], ["0", "When?", "Then."], ["1", "Who?", "I."]]),
    "RTE": ([["index", "sentence1", "sentence2", "label"],
             ["0", "A cat sat.", "A cat sits.", "entailment"],
             ["1", "A dog ran.", "A cat ran.", "not_entailment"]],
            [["index", "sentence1", "sentence2"], ["0", "A.", "B."], ["1", "C.", "D."]]),
    "WNLI": ([["index", "sentence1", "sentence2", "label"],
              ["0", "I put the cake away.", "The cake was put away.", "1"],
              ["1", "John hit Bill.", "Bill hit John.", "0"]],
             [["index", "sentence1", "sentence2"], ["0", "A.", "B."], ["1", "C.", "D."]]),
}

# What each format's two labelled rows must give: texts of row 1, labels (ids or scores), ids.
EXPECTED = {
    "SST-2": (("a fine film ",), [1, 0], ["2", "3"]),
    "CoLA": (("The book was read.",), [1, 0], ["1", "2"]),
    "MRPC": (("He said so.", "\"He did say so."), [1, 0], ["2", "3"]),
    "QQP": (("How?", "Why?"), [0, 1], ["7", "8"]),
    "STS-B": (("A plane is taking off.", "An air plane is taking off."), [5.0, 0.25],
              ["0", "1"]),
    "MNLI": (("Conceptually cream skimming has two dimensions.", "Product and geography."),
             [2, 1], ["0", "1"]),
    "QNLI": (("When?", "In 1990."), [0, 1], ["0", "1"]),
    "RTE": (("A cat sat.", "A cat sits."), [0, 1], ["0", "1"]),
    "WNLI": (("I put the cake away.", "The cake was put away."), [1, 0], ["0", "1"]),
}


def test_every_task_has_a_format_under_test():
    assert set(FORMATS) == set(EXPECTED) == set(GLUE_TASKS)


@pytest.mark.parametrize("task_name", sorted(FORMATS))
def test_labelled_and_test_files_of_every_task(task_name, tmp_path):
    task = glue_task(task_name)
    labelled, test = FORMATS[task_name]
    texts, labels, ids = EXPECTED[task_name]
    examples = read_glue_tsv(write_tsv(tmp_path / "dev.tsv", labelled), task)
    assert tuple(column[0] for column in examples.texts) == texts
    assert examples.ids == ids
    if task.is_regression:
        assert examples.labels.dtype == np.float32 and task.num_outputs == 1
        np.testing.assert_array_equal(examples.labels, labels)
    else:
        assert examples.labels.tolist() == labels and task.num_outputs == len(task.label_names)
    unlabelled = read_glue_tsv(write_tsv(tmp_path / "test.tsv", test), task, labelled=False)
    assert unlabelled.labels is None and len(unlabelled) == 2
    assert unlabelled.ids == ["0", "1"] and len(unlabelled.texts) == len(texts)


def test_task_names_ignore_case_and_separators():
    assert glue_task("sst-2") is glue_task("SST2") is GLUE_TASKS["SST-2"]
    assert glue_task("sts_b").is_regression and glue_task("mnli").files["eval"] == (
        "dev_matched.tsv", "dev_mismatched.tsv")
    with pytest.raises(ValueError, match="Unknown GLUE task 'squad'; known: CoLA, SST-2"):
        glue_task("squad")


def test_empty_texts_are_skipped_and_counted_or_kept_for_prediction(tmp_path):
    path = write_tsv(tmp_path / "dev.tsv", [
        ["index", "sentence1", "sentence2", "label"], ["0", "A.", "B.", "entailment"],
        ["1", "  ", "B.", "entailment"], ["2", "A.", "", "not_entailment"],
        ["3", "C.", "D.", "not_entailment"]])
    examples = read_glue_tsv(path, glue_task("RTE"))
    assert examples.ids == ["0", "3"] and examples.lines == [2, 5]
    assert examples.labels.tolist() == [0, 1]
    assert examples.skipped == [(3, "empty 'sentence1'"), (4, "empty 'sentence2'")]
    kept = read_glue_tsv(path, glue_task("RTE"), labelled=False, skip_empty_texts=False)
    assert kept.ids == ["0", "1", "2", "3"] and kept.texts[1][2] == "" and not kept.skipped


def test_blank_lines_and_crlf_line_ends_are_not_examples(tmp_path):
    path = tmp_path / "train.tsv"
    path.write_bytes(b"sentence\tlabel\r\nfine\t1\r\n\r\ndull\t0\r\n\n")
    examples = read_glue_tsv(str(path), glue_task("SST-2"))
    assert examples.texts == (["fine", "dull"],) and examples.labels.tolist() == [1, 0]
    assert examples.lines == [2, 4]


@pytest.mark.parametrize("rows, task_name, message", [
    ([["sentence", "label"], ["fine", "1"], ["dull", "O"]], "SST-2",
     r"dev.tsv:3: unknown label 'O' in column 'label'; SST-2's labels are \['0', '1'\]"),
    ([["index", "sentence1", "sentence2", "label"], ["0", "A.", "B.", "contradiction"]], "RTE",
     r"dev.tsv:2: unknown label 'contradiction' in column 'label'; RTE's labels are "
     r"\['entailment', 'not_entailment'\]"),
    ([["sentence", "label"], ["fine", "1"], ["dull\t0"], ["a", "b", "c"]], "SST-2",
     r"dev.tsv:4: 3 tab-separated column\(s\), expected 2 \['sentence', 'label'\]"),
    ([["sentence", "label"], ["fine"]], "SST-2",
     r"dev.tsv:2: 1 tab-separated column\(s\), expected 2"),
    ([["sentence1", "sentence2", "label"], ["A.", "B.", "1"]], "MRPC",
     r"dev.tsv:1: no column '#1 String', which MRPC needs; the columns are \['sentence1', "
     r"'sentence2', 'label'\]. Is this a MRPC file"),
    ([["sentence"], ["fine"]], "SST-2", r"dev.tsv:1: no column 'label', which SST-2 needs"),
    ([["text,label"], ["fine,1"]], "SST-2", r"dev.tsv:1: no column 'sentence'"),
    ([["gj04", "1", ""], ["gj04", "0", "", "Read."]], "CoLA",
     r"dev.tsv:1: 3 tab-separated column\(s\), expected 4 \['source', 'label', "
     r"'original_label', 'sentence'\]"),
    ([["index", "sentence1", "sentence2", "score"], ["0", "A.", "B.", "high"]], "WNLI",
     r"dev.tsv:1: no column 'label'"),
    ([["index", "genre", "filename", "year", "old_index", "source1", "source2", "sentence1",
       "sentence2", "score"], ["0", "g", "f", "y", "o", "s", "s", "A.", "B.", "high"]], "STS-B",
     r"dev.tsv:2: the 'score' column must be a finite number for STS-B, got 'high'"),
    # float() reads them, but a NaN score trained to loss NaN (and exit status 0).
    *[([["index", "genre", "filename", "year", "old_index", "source1", "source2", "sentence1",
         "sentence2", "score"], ["0", "g", "f", "y", "o", "s", "s", "A.", "B.", "3"],
        ["1", "g", "f", "y", "o", "s", "s", "A.", "B.", score]], "STS-B",
       rf"dev.tsv:3: the 'score' column must be a finite number for STS-B, got '{score}'")
      for score in ("nan", "NaN", "inf", "-Infinity")],
    ([["sentence", "label"]], "SST-2", r"dev.tsv has no SST-2 examples"),
    ([["sentence", "label"], ["", "1"]], "SST-2",
     r"dev.tsv has no SST-2 examples \(1 skipped for an empty text\)"),
])
def test_bad_files_are_errors_naming_file_line_and_column(rows, task_name, message, tmp_path):
    path = write_tsv(tmp_path / "dev.tsv", rows)
    with pytest.raises(ValueError, match=message):
        read_glue_tsv(path, glue_task(task_name))


def test_missing_empty_and_non_utf8_files(tmp_path):
    task = glue_task("SST-2")
    with pytest.raises(FileNotFoundError, match=r"SST-2 data file .*nowhere.tsv does not exist"):
        read_glue_tsv(str(tmp_path / "nowhere.tsv"), task)
    (tmp_path / "empty.tsv").write_bytes(b"\n\n")
    with pytest.raises(ValueError, match=r"empty.tsv is empty"):
        read_glue_tsv(str(tmp_path / "empty.tsv"), task)
    path = write_tsv(tmp_path / "latin1.tsv", [["sentence", "label"], ["ok", "1"],
                                               ["caf\u00e9", "0"]], encoding="latin-1")
    with pytest.raises(ValueError, match=r"latin1.tsv:3: not UTF-8 text \(invalid "
                                         r"continuation byte at byte 3 of the line\)"):
        read_glue_tsv(path, task)


def test_a_file_of_lone_carriage_returns_is_named_in_a_short_line(tmp_path):
    # Old Mac line ends made the whole file one line: its 98,574-byte error listed every
    # "column".
    path = tmp_path / "dev.tsv"
    path.write_bytes(b"sentence\tlabel\r" + b"a long enough sentence\t1\r" * 2000)
    with pytest.raises(ValueError) as error:
        read_glue_tsv(str(path), glue_task("SST-2"))
    assert str(error.value) == (
        f"{path}:1: lines end in a lone carriage return (CR, as old Mac files do); GLUE files "
        f"have one example per line, ending in LF or CRLF")


def test_a_header_of_many_columns_is_listed_short(tmp_path):
    path = write_tsv(tmp_path / "dev.tsv", [[f"column {i} " * 10 for i in range(30)]])
    with pytest.raises(ValueError) as error:
        read_glue_tsv(path, glue_task("SST-2"))
    assert len(str(error.value)) < 800 and "... (30 columns)" in str(error.value)


def test_lines_of_spaces_are_skipped_as_blank_lines_are(tmp_path):
    path = tmp_path / "dev.tsv"
    path.write_text("sentence\tlabel\nfine\t1\n   \n\ndull\t0\n", encoding="utf-8")
    assert read_glue_tsv(str(path), glue_task("SST-2")).texts == (["fine", "dull"],)
