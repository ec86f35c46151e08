"""Offline preparation of catalog datasets: what `tfds.load` then reads (catalog name, config,
version, features, splits), the command in a fresh process as a user runs it (its own lines
only, errors in one line), bad sources named, and nothing left behind by a failure."""

import logging
import os
import subprocess
import sys
import tempfile

import pytest
import tensorflow_datasets as tfds

from bert_tf.data.tfds import local_preparation
from bert_tf.data.tfds.catalog import TfdsInputError, prepared_builder
from bert_tf.data.tfds.local_preparation import LocalSourceError, prepare_local
from tests.data.tfds.prepared import prepared_data_dir
from tests.resources import REPO_ROOT, shared_data_path


def run_preparation(*flags):
    """`python -m bert_tf.data.tfds.local_preparation` with `flags` in a fresh process, as a
    user runs it (no TF_CPP_MIN_LOG_LEVEL of the test's environment)."""
    env = {name: value for name, value in os.environ.items() if name != "TF_CPP_MIN_LOG_LEVEL"}
    return subprocess.run([sys.executable, "-m", "bert_tf.data.tfds.local_preparation", *flags],
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)


def write_sst2(directory, train, dev):
    """SST-2 source files in `directory`: `train` and `dev` are lists of TSV rows."""
    directory.mkdir(exist_ok=True)
    for name, rows in [("train.tsv", train), ("dev.tsv", dev)]:
        (directory / name).write_text("".join(row + "\n" for row in rows), encoding="utf-8")
    return str(directory)


def tree(directory):
    """{relative path: bytes} of every file under `directory`."""
    return {os.path.relpath(os.path.join(root, name), directory):
            open(os.path.join(root, name), "rb").read()
            for root, _, names in os.walk(directory) for name in names}


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
    result = run_preparation("--tfds_name=glue/sst2", f"--source_dir={source}",
                             f"--data_dir={tmp_path}", "--max_examples_per_split=50")
    assert result.returncode == 0, result.stderr[-2000:]
    # Its own line only: no TFDS "Downloading and preparing", progress bar or log line, no
    # TensorFlow start-up line.
    assert result.stdout == (f"Prepared glue/sst2/2.0.0 in {tmp_path}/glue/sst2/2.0.0: "
                             f"train 50, validation 50\n")
    assert result.stderr == ""
    assert sorted(os.listdir(tmp_path)) == ["glue"]   # no empty `downloads` beside it
    validation = tfds.load("glue/sst2", split="validation", data_dir=str(tmp_path))
    assert sorted(int(example["idx"]) for example in validation) == list(range(50))


def test_the_help_lists_the_flags():
    result = run_preparation("--helpshort")
    for flag in ["--tfds_name", "--source_dir", "--data_dir", "--max_examples_per_split"]:
        assert f"  {flag}: " in result.stdout


def test_a_long_split_logs_its_progress(tmp_path, monkeypatch, caplog):
    source = write_sst2(tmp_path / "sst2", ["sentence\tlabel", "good\t1", "bad\t0"],
                        ["sentence\tlabel", "fine\t1"])
    monkeypatch.setattr(local_preparation, "_PROGRESS_SECONDS", 0)  # every split is long
    with caplog.at_level(logging.INFO, logger="bert_tf.data"):
        prepare_local("glue/sst2", source, str(tmp_path / "tfds"))
    train, dev = f"{source}/train.tsv", f"{source}/dev.tsv"
    assert [record.getMessage() for record in caplog.records
            if record.name == "bert_tf.data"] == [
        f"train: 1 examples read from {train} so far",
        f"train: 2 examples read from {train} so far",
        f"train: 2 examples read from {train}; writing them",
        f"validation: 1 examples read from {dev} so far",
        f"validation: 1 examples read from {dev}; writing them"]


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


@pytest.mark.parametrize("case, error", [
    ("no source dir", "glue/sst2: the source directory {tmp}/nowhere does not exist"),
    ("unknown name", "glue/sst3: GLUE's configs are cola, sst2, mrpc, qqp, stsb, mnli, "
                     "mnli_mismatched, mnli_matched, qnli, rte, wnli"),
    ("not a GLUE file", "glue/sst2: {tmp}/sst2/dev.tsv cannot be read as its validation "
                        "split: no field 'sentence'"),
    ("a label out of range", "glue/sst2: {tmp}/sst2/dev.tsv cannot be read as its validation "
                             "split: Failed to encode example: {{'sentence': 'bad', 'idx': 0, "
                             "'label': 7}} In <ClassLabel> with name \"label\": Class label 7 "
                             "greater than configured num_classes 2"),
    ("a header only", "glue/sst2: {tmp}/sst2/dev.tsv cannot be read as its validation split: "
                      "no example belongs to it (TFDS cannot write an empty split)"),
    ("data dir is a file", "glue/sst2: the data dir {tmp}/tfds is a file, not a directory"),
    ("a file above the data dir", "glue/sst2: the data dir {tmp}/tfds/x cannot be made: "
                                  "{tmp}/tfds is a file"),
])
def test_an_error_is_one_line(tmp_path, case, error):
    dev = {"not a GLUE file": ["text\tlabel", "good\t1"],
           "a label out of range": ["sentence\tlabel", "bad\t7"],
           "a header only": ["sentence\tlabel"]}.get(
        case, ["sentence\tlabel", "good\t1"])
    source = write_sst2(tmp_path / "sst2", ["sentence\tlabel", "good\t1"], dev)
    data_dir = tmp_path / "tfds"
    if "file" in case and "GLUE" not in case:
        data_dir.write_text("not a directory")
    flags = {"no source dir": [f"--source_dir={tmp_path}/nowhere"],
             "unknown name": ["--tfds_name=glue/sst3"],
             "a file above the data dir": [f"--data_dir={data_dir}/x"]}.get(case, [])
    result = run_preparation("--tfds_name=glue/sst2", f"--source_dir={source}",
                             f"--data_dir={data_dir}", *flags)
    assert result.returncode == 1
    assert result.stderr == f"local_preparation: error: {error.format(tmp=tmp_path)}\n"
    assert result.stdout == ""


def test_a_failed_preparation_leaves_nothing_to_read(tmp_path):
    # TFDS writes the splits in an `incomplete.*` directory, renamed to the version's only
    # when every split is written: train is written here before dev.tsv fails.
    data_dir = tmp_path / "tfds"
    cola_source = tmp_path / "cola"
    cola_source.mkdir()
    (cola_source / "dev.tsv").write_text("gj04\t1\t\tThe dog barked.\n", encoding="utf-8")
    prepare_local("glue/cola", str(cola_source), str(data_dir))
    before = tree(data_dir)
    source = write_sst2(tmp_path / "sst2", ["sentence\tlabel"] + [f"film {i}\t1" for i in
                                                                  range(100)],
                        ["text\tlabel", "good\t1"])
    result = run_preparation("--tfds_name=glue/sst2", f"--source_dir={source}",
                             f"--data_dir={data_dir}")
    assert result.returncode == 1
    assert result.stderr.startswith(f"local_preparation: error: glue/sst2: {source}/dev.tsv")
    with pytest.raises(TfdsInputError, match="is not prepared in"):
        prepared_builder("glue/sst2", str(data_dir))
    assert os.listdir(data_dir / "glue" / "sst2") == []   # no version, no incomplete.* left
    assert tree(data_dir) == before   # the dataset prepared before is untouched
    assert len(tfds.load("glue/cola", split="validation", data_dir=str(data_dir))) == 1


def test_no_temporary_directory_is_left_behind(tmp_path, monkeypatch):
    # TFDS made an empty `tmp*tfds` directory in the temporary files' directory for every
    # dataset it had not prepared yet, and left it (hundreds of them after a few test runs).
    temporary = tmp_path / "temporary"
    temporary.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temporary))
    source = write_sst2(tmp_path / "sst2", ["sentence\tlabel", "a film\t1"],
                        ["sentence\tlabel", "good\t1"])
    prepare_local("glue/sst2", source, str(tmp_path / "tfds"))
    assert len(tfds.load("glue/sst2", split="validation", data_dir=str(tmp_path / "tfds"))) == 1
    assert os.listdir(temporary) == []
    assert tempfile.gettempdir() == str(temporary)   # the caller's setting is back
