"""Which paths name one file (`file_keys`), which output files would destroy one
(`output_file_problems`), what a path names (`file_kind`), which file keeps a directory
from being made (`file_in_the_way`) or written (`unwritable_path`), local and remote, and
files replaced whole or not at all (`replacing`), and what interrupted writers left
(`remove_leftover_directories`)."""

import os
import stat

import pytest
import tensorflow as tf

from bert_tf.file_io import (file_in_the_way, file_keys, file_kind, open_file,
                             output_file_problems, remove_leftover_directories, replacing,
                             unwritable_path)
from tests.read_only import read_only


def test_paths_of_one_file_share_a_key(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "corpus.txt").write_text("text")
    os.link("corpus.txt", "hard_link.txt")
    os.symlink(tmp_path / "corpus.txt", "symbolic_link.txt")
    for other in ("./corpus.txt", "missing/../corpus.txt", str(tmp_path / "corpus.txt"),
                  "hard_link.txt", "symbolic_link.txt"):
        assert file_keys("corpus.txt") & file_keys(other), other
    (tmp_path / "copy.txt").write_text("text")
    assert not file_keys("corpus.txt") & file_keys("copy.txt")
    # A file that does not exist yet: its path alone.
    assert file_keys("new.txt") == file_keys("./missing/../new.txt") == {
        os.path.realpath(tmp_path / "new.txt")}


def test_a_remote_path_is_its_own_key():
    assert file_keys("gs://bucket/data/corpus.txt") == {"gs://bucket/data/corpus.txt"}
    assert not file_keys("gs://bucket/a.txt") & file_keys("gs://bucket/b.txt")


def test_outputs_that_are_inputs_each_other_or_directories(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "corpus.txt").write_text("text")
    os.link("corpus.txt", "hard_link.txt")
    (tmp_path / "directory").mkdir()
    outputs = ["hard_link.txt", "missing/../corpus.txt", "out.txt", "./out.txt", "directory",
               "gs://bucket/out.txt", "gs://bucket/out.txt", "other.txt",
               "corpus.txt/vocab.txt", "new/deeper/vocab.txt"]
    assert output_file_problems(outputs, ["corpus.txt", "gs://bucket/in.txt"]) == [
        "output file hard_link.txt is also an input file",
        "output file missing/../corpus.txt is also an input file",
        "output file ./out.txt is named twice",
        "output file directory is a directory",
        "output file gs://bucket/out.txt is named twice",
        "output file corpus.txt/vocab.txt cannot be written: corpus.txt is a file, not a "
        "directory"]
    assert output_file_problems(["corpus.txt"]) == []


def test_what_a_path_names_locally_and_remotely(tmp_path):
    (tmp_path / "vocab.txt").write_text("[PAD]\n")
    assert [file_kind(path) for path in (str(tmp_path), f"{tmp_path}/vocab.txt", "/dev/null",
                                         f"{tmp_path}/none.txt")] == [
        "directory", "file", "other", None]
    # ram:// is a filesystem of TensorFlow's, as gs:// is: os.path knows none of its paths.
    tf.io.gfile.makedirs("ram://file_kind/dir")
    with tf.io.gfile.GFile("ram://file_kind/vocab.txt", "w") as f:
        f.write("[PAD]\n")
    assert [file_kind(f"ram://file_kind/{name}") for name in ("dir", "vocab.txt", "none")] == [
        "directory", "file", None]


def test_the_file_in_the_way_of_a_directory(tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("keep")
    assert file_in_the_way(str(notes)) == str(notes)
    assert file_in_the_way(str(notes / "run1" / "a")) == str(notes)
    assert file_in_the_way(str(tmp_path / "new" / "run1")) is None
    assert file_in_the_way("gs://bucket/notes.txt/run1") is None


def test_the_path_a_job_cannot_write(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    for name in ("eval_results.json", "predictions.tsv", "notes.txt"):
        (run / name).write_text("kept")
    (run / "train").mkdir()
    names = ["eval_results.json", "predictions*.tsv", "train"]
    assert unwritable_path(str(run), names) is None
    with read_only(run / "predictions.tsv"):
        assert unwritable_path(str(run), names) == str(run / "predictions.tsv")
        assert unwritable_path(str(run), ["eval_results.json"]) is None  # not written again
    with read_only(run / "notes.txt"):
        assert unwritable_path(str(run), names) is None  # not the job's
    with read_only(run / "train"):  # its new event files go in there
        assert unwritable_path(str(run), names) == str(run / "train")
    with read_only(run):
        assert unwritable_path(str(run), names) == str(run)
        assert unwritable_path(str(run / "new" / "deeper"), names) == str(run)  # made in it
    assert unwritable_path(str(tmp_path / "new"), names) is None
    assert unwritable_path("gs://bucket/run", names) is None
    assert os.listdir(tmp_path) == ["run"]  # what was tried to tell is gone
    # Nothing can be made in /proc, whose permission bits let root write.
    assert unwritable_path("/proc/bert_tf_models", names) == "/proc"


def test_a_file_is_replaced_whole_or_not_at_all(tmp_path):
    path = tmp_path / "predictions.tsv"
    path.write_text("old\n")
    os.chmod(path, 0o640)
    with pytest.raises(KeyboardInterrupt):  # Ctrl-C, or a full disk, halfway through
        with replacing(str(path)) as temporary, open(temporary, "w") as f:
            f.write("new, first half\n")
            raise KeyboardInterrupt
    assert path.read_text() == "old\n" and os.listdir(tmp_path) == ["predictions.tsv"]
    with replacing(str(path)) as temporary, open(temporary, "w") as f:
        f.write("new\n")
    assert path.read_text() == "new\n" and os.listdir(tmp_path) == ["predictions.tsv"]
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640

    link = tmp_path / "link.tsv"  # a symbolic link keeps naming the replaced file
    link.symlink_to(path)
    with replacing(str(link)) as temporary, open(temporary, "w") as f:
        f.write("through the link\n")
    assert link.is_symlink() and path.read_text() == "through the link\n"

    with read_only(path), pytest.raises(PermissionError, match="predictions.tsv"):
        with replacing(str(path)):
            pass
    assert path.read_text() == "through the link\n"


def test_a_remote_file_is_written_in_place():
    with replacing("ram://replacing/results.json") as temporary:
        assert temporary == "ram://replacing/results.json"  # whole when its writer closes
        with open_file(temporary, "w") as f:
            f.write("{}")
    assert tf.io.gfile.GFile("ram://replacing/results.json").read() == "{}"


def test_a_file_written_with_open_file_is_whole_or_as_it_was(tmp_path):
    path = tmp_path / "bert_config.json"
    path.write_text('{"hidden_size": 768}\n')
    with pytest.raises(KeyboardInterrupt):
        with open_file(str(path), "w") as f:
            f.write('{"hidden_')
            raise KeyboardInterrupt
    assert path.read_text() == '{"hidden_size": 768}\n' and os.listdir(tmp_path) == [path.name]
    f = open_file(str(path), "w")  # closed without a `with` block
    f.write('{"hidden_size": 128}\n')
    assert path.read_text() == '{"hidden_size": 768}\n'  # until it is closed
    f.close()
    assert path.read_text() == '{"hidden_size": 128}\n' and os.listdir(tmp_path) == [path.name]
    with pytest.raises(FileNotFoundError) as error:  # named as given, not as written
        open_file(str(tmp_path / "missing" / "vocab.txt"), "wb")
    assert error.value.filename == str(tmp_path / "missing" / "vocab.txt")


def test_leftover_directories_are_removed_and_named(tmp_path):
    for name in ("b_temp", "a_temp", "kept"):
        (tmp_path / name / "inner").mkdir(parents=True)
    (tmp_path / "file_temp").write_text("a file, not a directory a writer left")
    removed = remove_leftover_directories(str(tmp_path), lambda path: path.endswith("_temp"))
    assert removed == [str(tmp_path / "a_temp"), str(tmp_path / "b_temp")]
    assert sorted(os.listdir(tmp_path)) == ["file_temp", "kept"]
    assert remove_leftover_directories(str(tmp_path / "missing"), lambda path: True) == []
