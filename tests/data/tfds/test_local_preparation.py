"""Offline preparation of catalog datasets: what `tfds.load` then reads (catalog name, config,
version, features, splits), the command in a fresh process, and bad sources named."""

import os
import subprocess
import sys

import pytest
import tensorflow_datasets as tfds

from bert_tf.data.tfds.local_preparation import LocalSourceError, prepare_local
from tests.data.tfds.prepared import prepared_data_dir
from tests.resources import REPO_ROOT, shared_data_path


def test_tfds_load_reads_the_catalog_dataset(tmp_path_factory):
    data_dir = prepared_data_dir(tmp_path_factory, "glue/mrpc", "MRPC")
    builder = tfds.builder("glue/mrpc", data_dir=data_dir)
    assert builder.info.full_name == "glue/mrpc/2.0.0"
    assert type(builder).__name__ == "Glue"    # the catalog's own builder reads it
    assert sorted(builder.info.features) == ["idx", "label", "sentence1", "sentence2"]
    assert builder.info.features["label"].names == ["not_equivalent", "equivalent"]
    assert {name: split.num_examples for name, split in builder.info.splits.items()} == {
        "train": 3668, "validation": 408}
    first = next(iter(tfds.load("glue/mrpc", split="validation", data_dir=data_dir)
                      .filter(lambda example: example["idx"] == 0)))
    # GLUE's MRPC dev.tsv, first row: quality 1.
    assert first["sentence1"].numpy().decode().startswith("He said the foodservice pie business")
    assert int(first["label"]) == 1


def test_catalog_versions_and_features_are_kept(tmp_path_factory):
    squad_dir = prepared_data_dir(tmp_path_factory, "squad/v1.1", "squad")
    squad_builder = tfds.builder("squad/v1.1", data_dir=squad_dir)
    assert squad_builder.info.full_name == "squad/v1.1/3.0.0"
    assert list(squad_builder.info.splits) == ["validation"]   # no train file here
    assert sorted(squad_builder.info.features) == ["answers", "context", "id", "question",
                                                   "title"]
    conll_dir = prepared_data_dir(tmp_path_factory, "conll2003", "conll2003")
    conll_builder = tfds.builder("conll2003", data_dir=conll_dir)
    assert conll_builder.info.full_name == "conll2003/conll2003/1.0.0"
    assert {name: split.num_examples for name, split in conll_builder.info.splits.items()} == {
        "train": 14041, "dev": 3250}


def test_the_command_prepares_a_slice_in_a_fresh_process(tmp_path):
    source = shared_data_path("SST-2")
    result = subprocess.run(
        [sys.executable, "-m", "bert_tf.data.tfds.local_preparation", "--tfds_name=glue/sst2",
         f"--source_dir={source}", f"--data_dir={tmp_path}", "--max_examples_per_split=50"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert f"Prepared glue/sst2/2.0.0 in {tmp_path}/glue/sst2/2.0.0: train 50, validation 50" \
        in result.stdout
    validation = tfds.load("glue/sst2", split="validation", data_dir=str(tmp_path))
    assert sorted(int(example["idx"]) for example in validation) == list(range(50))


def test_bad_sources_are_named(tmp_path):
    with pytest.raises(LocalSourceError, match=r"glue/sst2: the source directory .*nowhere "
                                               r"does not exist"):
        prepare_local("glue/sst2", str(tmp_path / "nowhere"), str(tmp_path))
    with pytest.raises(LocalSourceError, match=r"glue/sst2: .* has none of the files dev.tsv, "
                                               r"test.tsv, train.tsv"):
        prepare_local("glue/sst2", str(tmp_path), str(tmp_path))
    with pytest.raises(LocalSourceError, match=r"glue/sst3: GLUE's configs are cola, sst2"):
        prepare_local("glue/sst3", str(tmp_path), str(tmp_path))
    with pytest.raises(LocalSourceError, match=r"wikipedia/20230601.en: no local preparation"):
        prepare_local("wikipedia/20230601.en", str(tmp_path), str(tmp_path))
    result = subprocess.run(
        [sys.executable, "-m", "bert_tf.data.tfds.local_preparation", "--tfds_name=squad/v3",
         f"--source_dir={tmp_path}", f"--data_dir={tmp_path}"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        "local_preparation: error: squad/v3: SQuAD's configs are v1.1 and v2.0")
    assert not os.path.exists(tmp_path / "squad")
