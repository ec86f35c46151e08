"""TFDS's glue/<config> read as the TSV reader reads GLUE's files: prepared offline from the same
files, the same texts, labels and order; label orders mapped by name or digit; errors named."""

import numpy as np
import pytest

from bert_tf.data.tasks.glue import read_glue_tsv
from bert_tf.data.tasks.glue_tasks import glue_task
from bert_tf.data.tfds.catalog import TfdsInputError
from bert_tf.data.tfds.glue import (glue_task_for_tfds, glue_tfds_splits, read_glue_tfds,
                                    tfds_class_ids)
from tests.data.tfds.prepared import prepared_data_dir
from tests.resources import shared_data_path

TASKS = {"glue/sst2": "SST-2", "glue/mrpc": "MRPC", "glue/cola": "CoLA", "glue/rte": "RTE"}


@pytest.mark.parametrize("tfds_name", sorted(TASKS))
@pytest.mark.parametrize("split,file_name", [("train", "train.tsv"), ("validation", "dev.tsv")])
def test_same_examples_as_the_tsv_reader(tmp_path_factory, tfds_name, split, file_name):
    data_dir = prepared_data_dir(tmp_path_factory, tfds_name, TASKS[tfds_name])
    task = glue_task_for_tfds(tfds_name)
    assert task is glue_task(TASKS[tfds_name])
    from_tfds = read_glue_tfds(tfds_name, split, data_dir, task)
    from_file = read_glue_tsv(shared_data_path(f"{TASKS[tfds_name]}/{file_name}"), task)
    assert len(from_tfds) == len(from_file)
    assert from_tfds.texts == from_file.texts
    assert from_tfds.labels.dtype == np.int32
    np.testing.assert_array_equal(from_tfds.labels, from_file.labels)
    assert from_tfds.ids == [str(i) for i in range(len(from_file))]   # TFDS's idx: file rows
    assert from_tfds.path == f"{tfds_name}:{split}" and not from_tfds.skipped


def test_real_label_counts(tmp_path_factory):
    data_dir = prepared_data_dir(tmp_path_factory, "glue/sst2", "SST-2")
    examples = read_glue_tfds("glue/sst2", "validation", data_dir, glue_task("SST-2"))
    # SST-2 dev: 428 negative ("0"), 444 positive ("1").
    assert len(examples) == 872 and np.bincount(examples.labels).tolist() == [428, 444]


@pytest.mark.parametrize("task_name,tfds_names,expected", [
    # TFDS orders MNLI "entailment, neutral, contradiction"; Google "contradiction,
    # entailment, neutral".
    ("MNLI", ["entailment", "neutral", "contradiction"], [1, 2, 0]),
    ("RTE", ["entailment", "not_entailment"], [0, 1]),
    ("QNLI", ["entailment", "not_entailment"], [0, 1]),
    # GLUE's digits: TFDS class i is the file's "i" (WNLI's "1" is entailment).
    ("WNLI", ["not_entailment", "entailment"], [0, 1]),
    ("CoLA", ["unacceptable", "acceptable"], [0, 1]),
    ("MRPC", ["not_equivalent", "equivalent"], [0, 1]),
    ("QQP", ["not_duplicate", "duplicate"], [0, 1]),
])
def test_class_ids_follow_the_tasks_label_order(task_name, tfds_names, expected):
    assert tfds_class_ids(tfds_names, glue_task(task_name), "glue/x").tolist() == expected


def test_class_names_that_do_not_map_are_an_error():
    with pytest.raises(TfdsInputError, match=r"glue/x: its classes \['a', 'b', 'c'\] do not "
                                             r"map onto MNLI's labels"):
        tfds_class_ids(["a", "b", "c"], glue_task("MNLI"), "glue/x")


def test_splits_per_mode():
    mnli, sst2 = glue_task_for_tfds("glue/mnli"), glue_task_for_tfds("glue/sst2")
    assert glue_tfds_splits(mnli, "eval") == ("validation_matched", "validation_mismatched")
    assert glue_tfds_splits(mnli, "predict") == ("test_matched", "test_mismatched")
    assert glue_tfds_splits(mnli, "eval", "validation") == glue_tfds_splits(mnli, "eval")
    assert glue_tfds_splits(mnli, "eval", "validation_mismatched") == ("validation_mismatched",)
    assert glue_tfds_splits(sst2, "predict", "test") == ("test",)
    assert glue_tfds_splits(sst2, "eval") == ("validation",)
    assert glue_tfds_splits(sst2, "train", "train[:10%]") == ("train[:10%]",)
    assert glue_task_for_tfds("glue/stsb").is_regression


def test_test_split_without_labels_keeps_empty_texts(tmp_path):
    from bert_tf.data.tfds.local_preparation import prepare_local

    source = tmp_path / "SST-2"
    source.mkdir()
    (source / "test.tsv").write_text("index\tsentence\n0\tfine film\n1\t \n2\tdull\n")
    prepare_local("glue/sst2", str(source), str(tmp_path / "tfds"))
    examples = read_glue_tfds("glue/sst2", "test", str(tmp_path / "tfds"), glue_task("SST-2"),
                              labelled=False, skip_empty_texts=False)
    assert examples.ids == ["0", "1", "2"] and examples.texts == (["fine film", " ", "dull"],)
    assert examples.labels is None
    with pytest.raises(TfdsInputError, match=r"glue/sst2:test: example idx 0 has no label "
                                             r"\(-1\); read test splits for prediction only"):
        read_glue_tfds("glue/sst2", "test", str(tmp_path / "tfds"), glue_task("SST-2"))
    skipping = read_glue_tfds("glue/sst2", "test", str(tmp_path / "tfds"), glue_task("SST-2"),
                              labelled=False)
    assert skipping.ids == ["0", "2"] and skipping.skipped == [(1, "empty 'sentence'")]


def test_bad_names_splits_and_data_dirs(tmp_path_factory, tmp_path):
    with pytest.raises(TfdsInputError, match=r"--tfds_name 'glue/ax' is not a GLUE task; use "
                                             r"glue/<config> with a config of cola, sst2"):
        glue_task_for_tfds("glue/ax")
    with pytest.raises(TfdsInputError, match=r"TFDS dataset 'glue/sst2' is not prepared in "
                                             r".*nothing is downloaded at run time"):
        read_glue_tfds("glue/sst2", "train", str(tmp_path), glue_task("SST-2"))
    data_dir = prepared_data_dir(tmp_path_factory, "glue/sst2", "SST-2")
    with pytest.raises(TfdsInputError, match=r"glue/sst2/2.0.0 has no split 'dev'; its splits "
                                             r"are train, validation"):
        read_glue_tfds("glue/sst2", "dev", data_dir, glue_task("SST-2"))
