"""Reading SWAG CSV files and packing one (context, choice) pair per choice."""

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.data.tasks.swag import SwagFormatError, read_swag
from bert_tf.text.bert_preprocessor import BertPreprocessor

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "the", "man", "opens", "door", "a", "she", "runs",
         "walks", "sits", "away", "home", "."]
HEADER = "video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,label\n"
ROWS = ('lsmdc1,17,x,The man opens the door.,She,gold,runs away.,walks home.,sits.,1\n'
        'lsmdc2,18,x,"A man, a door.",,gen,runs,walks,"sits, home",2\n')


def write(tmp_path, text, name="val.csv", encoding="utf-8"):
    path = tmp_path / name
    path.write_bytes(text.encode(encoding))
    return str(path)


def test_reads_contexts_choices_labels(tmp_path):
    examples = read_swag(write(tmp_path, HEADER + ROWS), require_labels=True)
    assert examples.contexts == ["The man opens the door.", "A man, a door."]
    assert examples.choices == [["She runs away.", "She walks home.", "She sits."],
                                ["runs", "walks", "sits, home"]]
    assert examples.labels == [1, 2] and examples.num_choices == 3
    assert examples.lines == [2, 3] and examples.ids == ["17", "18"]


def test_without_labels_for_prediction(tmp_path):
    text = "sent1,sent2,ending0,ending1\nThe man,She,runs,walks\n"
    examples = read_swag(write(tmp_path, text, "test.csv"), require_labels=False)
    assert examples.labels is None and examples.ids == ["2"]
    with pytest.raises(SwagFormatError, match=r"test.csv:1: no column 'label' in the header"):
        read_swag(str(tmp_path / "test.csv"), require_labels=True)


def test_packs_each_choice_with_the_context(tmp_path):
    examples = read_swag(write(tmp_path, HEADER + ROWS), require_labels=True)
    preprocessor = BertPreprocessor(VOCAB, lower_case=True, seq_length=8)
    elements = list(examples.dataset(preprocessor))
    assert [int(label) for _, label in elements] == [1, 2]
    for (features, _), context, choices in zip(elements, examples.contexts, examples.choices):
        expected = preprocessor((tf.constant([context] * len(choices)), tf.constant(choices)))
        assert features["input_word_ids"].shape == (3, 8)
        for key, value in expected.items():
            np.testing.assert_array_equal(features[key], value)
    # Pieces + [CLS] and 2 [SEP]: "the man opens the door ." with "she runs away ." and
    # "she walks home ." 13, with "she sits ." 12; "a man , a door ." with the others 10-12.
    assert examples.truncated_choices(preprocessor.tokenizer, 8) == 6
    assert examples.truncated_choices(preprocessor.tokenizer, 12) == 2
    assert examples.truncated_choices(preprocessor.tokenizer, 13) == 0


@pytest.mark.parametrize("text, message", [
    ("", r"val.csv: empty file"),
    ("sent1,sent2,ending0,label\n", r"val.csv:1: the header needs the columns ending0, ending1"),
    ("sent1,sent2,ending0,ending2,label\n", r"val.csv:1: the header needs the columns ending0"),
    ("sent2,ending0,ending1,label\n", r"val.csv:1: no column 'sent1' in the header"),
    ("sent1,sent2,ending0,ending1,label\na,b,c,d,0\n\ne,f,g,0\n",
     r"val.csv:4: 4 field\(s\), but the header has 5"),
    ("sent1,sent2,ending0,ending1,label\n ,b,c,d,0\n", r"val.csv:2: column 'sent1' is empty"),
    ("sent1,sent2,ending0,ending1,label\na,b,c,,0\n", r"val.csv:2: column 'ending1' is empty"),
    ("sent1,sent2,ending0,ending1,label\na,b,c,d,2\n",
     r"val.csv:2: column 'label' is '2', not a choice index 0..1"),
    ("sent1,sent2,ending0,ending1,label\na,b,c,d,\n", r"val.csv:2: column 'label' is ''"),
    ("sent1,sent2,ending0,ending1,label\n", r"val.csv: no examples after the header"),
    ('sent1,sent2,ending0,ending1,label\n"a,b,c,d,1\n', r"val.csv:\d+: "),
])
def test_bad_input_names_file_line_and_column(tmp_path, text, message):
    with pytest.raises(SwagFormatError, match=message):
        read_swag(write(tmp_path, text), require_labels=True)


def test_not_utf8_names_its_line(tmp_path):
    # Decoded a block at a time, a bad byte on line 40 was reported "near line 1".
    rows = "".join(f"s{i},t,c,d,1\n" for i in range(38))
    path = write(tmp_path, f"sent1,sent2,ending0,ending1,label\n{rows}Café,b,c,d,1\n",
                 encoding="latin-1")
    with pytest.raises(SwagFormatError,
                       match=r"val.csv:40: not UTF-8 text \(invalid continuation byte at byte "
                             r"3 of the line\)"):
        read_swag(path, require_labels=True)
