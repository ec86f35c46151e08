"""TFDS's conll2003 read into CoNLL sentences: prepared offline from the real files, the same
sentences (words and all four columns) as the file reader, tag names from the ClassLabel."""

import collections

import pytest

from bert_tf.data.tasks import conll
from bert_tf.data.tfds.catalog import TfdsInputError
from bert_tf.data.tfds.conll import read_conll_tfds
from tests.data.tfds.prepared import prepared_data_dir
from tests.resources import shared_data_path

# The ClassLabel of TFDS's conll2003 `ner`, in its order.
NER_TAGS = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC"]


def rows(sentences):
    return collections.Counter(tuple(map(tuple, sentence.rows)) for sentence in sentences)


# "validation" reads conll2003's "dev": the tools' default evaluation split.
@pytest.mark.parametrize("split,file_name", [("train", "train.txt"), ("validation", "valid.txt")])
def test_same_sentences_as_the_file_reader(tmp_path_factory, split, file_name):
    data_dir = prepared_data_dir(tmp_path_factory, "conll2003", "conll2003")
    sentences, labels, where = read_conll_tfds("conll2003", split, data_dir)
    from_file = conll.read_conll(shared_data_path(f"conll2003/{file_name}"))
    assert where == f"conll2003/conll2003:{split.replace('validation', 'dev')}"
    assert len(sentences) == len(from_file) == {"train": 14041, "validation": 3250}[split]
    # TFDS stores sentences shuffled: the same multiset of sentences, every column equal.
    assert rows(sentences) == rows(from_file)
    assert labels == NER_TAGS
    assert not any(sentence.starts_document for sentence in sentences)
    assert [s.first_line for s in sentences] == sorted(s.first_line for s in sentences)
    # The label list covers every tag: class ids exist for all of them, in TFDS's order.
    ids = conll.tag_ids(sentences, labels, where)
    assert [NER_TAGS[i] for i in ids[0]] == sentences[0].tags


def test_a_dataset_without_ner_is_an_error(tmp_path_factory):
    data_dir = prepared_data_dir(tmp_path_factory, "glue/sst2", "SST-2")
    with pytest.raises(TfdsInputError, match=r"glue/sst2:train: no feature tokens, ner \(a "
                                             r"CoNLL-like dataset has tokens and ner\)"):
        read_conll_tfds("glue/sst2", "train", data_dir)
