"""The checks of the paths that flags name (`bert_tf.cli.path_checks`), and the tools that
refuse a file given for a directory, or a directory for a file, in those words."""

import tensorflow as tf

from bert_tf.cli.path_checks import (file_problem, input_file_problem, output_dir_problem,
                                     run_output_dir_problem, unwritable_output_problem)
from tests.read_only import read_only
from tests.resources import REPO_ROOT
from tests.tools.tool_runs import error_output, run_tool

TINY_CONFIG = f"{REPO_ROOT}/official_configs/bert_tiny.json"


def test_an_output_dir_must_not_be_or_lie_under_a_file(tmp_path):
    (tmp_path / "notes.txt").write_text("kept")
    (tmp_path / "runs").mkdir()
    assert output_dir_problem("output_dir", f"{tmp_path}/notes.txt") == (
        f"--output_dir {tmp_path}/notes.txt is a file, not a directory")
    assert output_dir_problem("output_dir", f"{tmp_path}/notes.txt/a/b") == (
        f"--output_dir {tmp_path}/notes.txt/a/b: {tmp_path}/notes.txt is a file, not a directory")
    for fine in (f"{tmp_path}/runs", f"{tmp_path}/runs/new/deeper", "relative/new", "new",
                 "gs://bucket/run"):
        assert output_dir_problem("output_dir", fine) is None, fine


def test_an_output_dir_and_the_files_written_again_there_must_be_writable(tmp_path):
    (tmp_path / "eval_results.json").write_text("{}")
    assert unwritable_output_problem("output_dir", str(tmp_path), ["eval_results.json"]) is None
    with read_only(tmp_path / "eval_results.json"):
        assert unwritable_output_problem("output_dir", str(tmp_path), ["eval_results.json"]) == (
            f"--output_dir {tmp_path}: {tmp_path}/eval_results.json is not writable; make it "
            f"writable or use another --output_dir")
    with read_only(tmp_path):
        assert unwritable_output_problem("export_dir", str(tmp_path)) == (
            f"--export_dir {tmp_path} is not writable; make it writable or use another "
            f"--export_dir")
    assert unwritable_output_problem("output_dir", "gs://bucket/run", ["eval_results.json"]) is None


def test_a_run_output_dir_is_checked_for_what_is_in_the_way_what_it_would_overwrite_and_writes(
        tmp_path):
    (tmp_path / "notes.txt").write_text("kept")
    assert run_output_dir_problem(f"{tmp_path}/notes.txt/run") == (
        f"--output_dir {tmp_path}/notes.txt/run: {tmp_path}/notes.txt is a file, not a directory")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "predictions.tsv").write_text("kept")
    assert run_output_dir_problem(str(tmp_path / "mine")) is None  # not a name this run writes
    assert run_output_dir_problem(str(tmp_path / "mine"), ["predictions*.tsv"]) == (
        f"--output_dir {tmp_path}/mine holds predictions.tsv but no run of bert_tf (no run.json), "
        f"and this run would overwrite it; use another --output_dir")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "run.json").write_text("{}")
    (tmp_path / "run" / "eval_results.json").write_text("{}")
    assert run_output_dir_problem(str(tmp_path / "run")) is None
    with read_only(tmp_path / "run" / "eval_results.json"):  # every run's own file
        assert run_output_dir_problem(str(tmp_path / "run")) == (
            f"--output_dir {tmp_path}/run: {tmp_path}/run/eval_results.json is not writable; make "
            f"it writable or use another --output_dir")
    assert (tmp_path / "notes.txt").read_text() == "kept"
    assert (tmp_path / "mine" / "predictions.tsv").read_text() == "kept"


def test_an_input_file_must_be_an_existing_file(tmp_path):
    (tmp_path / "vocab.txt").write_text("[PAD]\n")
    assert input_file_problem("vocab_file", str(tmp_path)) == (
        f"--vocab_file {tmp_path} is a directory, not a file")
    assert input_file_problem("vocab_file", f"{tmp_path}/none.txt") == (
        f"--vocab_file {tmp_path}/none.txt does not exist")
    assert input_file_problem("vocab_file", f"{tmp_path}/vocab.txt") is None
    assert input_file_problem("vocab_file", "/dev/null") == (
        "--vocab_file /dev/null is not a regular file")


def test_a_remote_input_file_is_checked_on_its_filesystem():
    # ram:// stands for gs://: os.path finds none of its paths, which are not "missing".
    tf.io.gfile.makedirs("ram://path_checks/model")
    with tf.io.gfile.GFile("ram://path_checks/model/vocab.txt", "w") as f:
        f.write("[PAD]\n")
    assert input_file_problem("vocab_file", "ram://path_checks/model/vocab.txt") is None
    assert input_file_problem("vocab_file", "ram://path_checks/model") == (
        "--vocab_file ram://path_checks/model is a directory, not a file")
    assert input_file_problem("vocab_file", "ram://path_checks/none.txt") == (
        "--vocab_file ram://path_checks/none.txt does not exist")


def test_the_problem_of_one_of_several_files_names_the_kind_of_file_wanted(tmp_path):
    assert file_problem(str(tmp_path), "text file") == f"{tmp_path} is a directory, not a text file"
    assert file_problem("/dev/null", "text file") == "/dev/null is not a regular file"
    assert file_problem(f"{tmp_path}/none.txt") == f"{tmp_path}/none.txt does not exist"


def test_fine_tuning_refuses_a_file_as_output_dir_and_a_directory_as_vocab_file(tmp_path):
    (tmp_path / "train.tsv").write_text("sentence\tlabel\na fine film\t1\n")
    (tmp_path / "notes.txt").write_text("kept")
    flags = ["--task_name=SST-2", f"--data_dir={tmp_path}", "--do_train",
             f"--bert_config_file={TINY_CONFIG}", f"--vocab_file={tmp_path}"]
    result = run_tool("run_classifier.py", *flags, f"--output_dir={tmp_path}/notes.txt")
    assert error_output(result) == (
        f"run_classifier: error: --output_dir {tmp_path}/notes.txt is a file, not a directory")
    result = run_tool("run_classifier.py", *flags, f"--output_dir={tmp_path}/out")
    assert error_output(result) == (
        f"run_classifier: error: --vocab_file {tmp_path} is a directory, not a file")
    assert (tmp_path / "notes.txt").read_text() == "kept"


def test_fine_tuning_refuses_a_file_as_data_dir(tmp_path):
    (tmp_path / "train.tsv").write_text("sentence\tlabel\na fine film\t1\n")
    for tool, task in [("run_classifier.py", "--task_name=SST-2"), ("run_ner.py", None)]:
        result = run_tool(tool, *filter(None, [task]), f"--data_dir={tmp_path}/train.tsv",
                          "--do_train", f"--bert_config_file={TINY_CONFIG}",
                          f"--vocab_file={tmp_path}/train.tsv", f"--output_dir={tmp_path}/out")
        assert error_output(result).endswith(
            f"--data_dir {tmp_path}/train.tsv is a file, not a directory (of the task's files)")
        assert not (tmp_path / "out").exists()


def test_convert_checkpoint_refuses_a_file_as_output_dir(tmp_path):
    (tmp_path / "notes.txt").write_text("kept")
    result = run_tool("convert_checkpoint.py", f"--checkpoint={tmp_path}/model",
                      f"--output_dir={tmp_path}/notes.txt")
    assert error_output(result) == (
        f"convert_checkpoint: error: --output_dir {tmp_path}/notes.txt is a file, not a directory")
    assert (tmp_path / "notes.txt").read_text() == "kept"
