"""check_existing_run / record_run: an output directory holding a run of another model,
vocabulary or task is refused with one message naming every difference, and left unchanged;
the same run passes (it resumes); a run resumed with other settings is told which
(other_training_settings) and recorded with them; a run begun before run.json existed is not
recorded; a directory holding the names a run writes but no run is refused
(other_files_problem)."""

import dataclasses
import json
import os

import pytest
import tensorflow as tf

from bert_tf.checkpoints.sources import lower_case_beside_checkpoint
from bert_tf.models.bert_classifier import BertClassifier
from bert_tf.models.bert_encoder import BertEncoder
from bert_tf.training.existing_run import (check_existing_run, is_run_output,
                                           other_files_problem, other_training_settings,
                                           record_run)
from tests.export.tiny_models import VOCAB, tiny_config, write_task_checkpoint, write_vocab


@pytest.fixture
def run_dir(tmp_path):
    """A directory where run_classifier started SST-2 with the tiny model."""
    vocab_file = write_vocab(str(tmp_path))
    output_dir = str(tmp_path / "run")
    check_existing_run(output_dir, tiny_config(), vocab_file, "run_classifier", "SST-2")
    record_run(output_dir, tiny_config(), vocab_file, "run_classifier", "SST-2")
    return output_dir, vocab_file


def _contents(directory):
    return {name: open(os.path.join(directory, name), "rb").read()
            for name in sorted(os.listdir(directory))}


def test_a_new_run_is_recorded_and_the_same_run_passes_again(run_dir):
    output_dir, vocab_file = run_dir
    assert sorted(os.listdir(output_dir)) == ["bert_config.json", "run.json", "vocab.txt"]
    assert json.load(open(os.path.join(output_dir, "run.json"))) == {
        "tool": "run_classifier", "task": "SST-2"}
    assert open(os.path.join(output_dir, "vocab.txt")).read().split() == VOCAB
    check_existing_run(output_dir, tiny_config(), vocab_file, "run_classifier", "SST-2")
    # A tool that writes no vocabulary (pre-training from records) is not compared with it.
    os.remove(os.path.join(output_dir, "run.json"))
    check_existing_run(output_dir, tiny_config(), None, "run_pretraining")


def test_a_run_trained_with_other_settings_is_refused(tmp_path):
    # Resumed with another learning rate or batch, its checkpoints continued a schedule they
    # had not started; a finished one re-reported its old metrics as the new settings'.
    vocab_file = write_vocab(str(tmp_path))
    output_dir = str(tmp_path / "run")
    settings = {"learning_rate": 1e-4, "train_batch_size": 8, "num_train_steps": None}
    record_run(output_dir, tiny_config(), vocab_file, "run_classifier", "SST-2",
               training=settings)
    assert json.load(open(os.path.join(output_dir, "run.json")))["training"] == settings
    check_existing_run(output_dir, tiny_config(), vocab_file, "run_classifier", "SST-2",
                       dict(settings))  # the same flags: it resumes
    check_existing_run(output_dir, tiny_config(), vocab_file, "run_classifier", "SST-2")
    before = _contents(output_dir)
    with pytest.raises(ValueError) as error:
        check_existing_run(output_dir, tiny_config(), vocab_file, "run_classifier", "SST-2",
                           {**settings, "learning_rate": 1e-3, "train_batch_size": 16})
    assert str(error.value) == (
        f"--output_dir {output_dir} holds a run with other training settings: --learning_rate "
        f"0.0001 there, 0.001 here, --train_batch_size 8 there, 16 here; use a new --output_dir "
        f"(--init_checkpoint={output_dir} starts from its weights), or its own flags to resume "
        f"it")
    assert _contents(output_dir) == before


def test_a_run_trained_on_other_data_is_refused(tmp_path):
    # Re-run on other data (SQuAD articles 0:4 after 0:3), a finished run said "already
    # trained" and an unfinished one resumed on the other data, silently.
    vocab_file = write_vocab(str(tmp_path))
    output_dir = str(tmp_path / "run")
    settings = {"learning_rate": 1e-4, "training_examples": 1638}
    record_run(output_dir, tiny_config(), vocab_file, "run_squad", training=settings)
    check_existing_run(output_dir, tiny_config(), vocab_file, "run_squad", None, dict(settings))
    with pytest.raises(ValueError) as error:
        check_existing_run(output_dir, tiny_config(), vocab_file, "run_squad", None,
                           {**settings, "training_examples": 2262})
    assert str(error.value) == (
        f"--output_dir {output_dir} holds a run with other training settings: training "
        f"examples (other data) 1638 there, 2262 here; use a new --output_dir "
        f"(--init_checkpoint={output_dir} starts from its weights), or its own flags to resume "
        f"it")


def test_a_run_resumed_with_other_settings_is_told_which_and_recorded_with_them(tmp_path):
    # Pre-training resumes with other settings (a second phase's batch size) instead of refusing.
    output_dir = str(tmp_path / "run")
    settings = {"learning_rate": 1e-3, "optimizer": "adamw", "num_warmup_steps": 2}
    record_run(output_dir, tiny_config(), None, "run_pretraining", training=settings)
    assert other_training_settings(output_dir, dict(settings)) is None
    resumed = {"learning_rate": 5e-4, "optimizer": "lamb"}  # no warmup: not compared
    assert other_training_settings(output_dir, resumed) == (
        "--learning_rate 0.001 there, 0.0005 here, --optimizer adamw there, lamb here")
    tf.train.CheckpointManager(tf.train.Checkpoint(step=tf.Variable(3)), output_dir,
                               max_to_keep=1, checkpoint_name="ckpt").save()
    record_run(output_dir, tiny_config(), None, "run_pretraining", training=resumed)
    # The next resume compares with what the checkpoints last trained with.
    assert json.load(open(os.path.join(output_dir, "run.json"))) == {
        "tool": "run_pretraining", "training": resumed}
    assert other_training_settings(output_dir, dict(resumed)) is None


@pytest.mark.parametrize("config, vocab, tool, task, message", [
    (tiny_config(num_hidden_layers=3), VOCAB, "run_classifier", "SST-2",
     "holds a run of another model: bert_config.json differs in num_hidden_layers (2 there, 3 "
     "here); use a new --output_dir"),
    (dataclasses.replace(tiny_config(), hidden_size=32, hidden_dropout_prob=0.2), VOCAB,
     "run_classifier", "SST-2",
     "holds a run of another model: bert_config.json differs in hidden_size (16 there, 32 here), "
     "hidden_dropout_prob (0.1 there, 0.2 here); use a new --output_dir"),
    (tiny_config(), VOCAB[:5] + ["hi"] + VOCAB[6:], "run_classifier", "SST-2",
     f"holds a run of another model: vocab.txt ({len(VOCAB)} tokens) is not {{vocab}} "
     f"({len(VOCAB)} tokens; they differ from line 6); use a new --output_dir"),
    (tiny_config(), VOCAB + ["extra"], "run_classifier", "SST-2",
     f"holds a run of another model: vocab.txt ({len(VOCAB)} tokens) is not {{vocab}} "
     f"({len(VOCAB) + 1} tokens; they differ from line {len(VOCAB) + 1}); use a new "
     f"--output_dir"),
    (tiny_config(), VOCAB, "run_classifier", "MRPC",
     "holds a run of another task: trained by run_classifier SST-2 (run.json), this run is "
     "run_classifier MRPC; use a new --output_dir"),
    (tiny_config(num_hidden_layers=1), VOCAB, "run_multiple_choice", None,
     "holds a run of another model and task: bert_config.json differs in num_hidden_layers (2 "
     "there, 1 here); trained by run_classifier SST-2 (run.json), this run is "
     "run_multiple_choice; use a new --output_dir"),
])
def test_another_run_is_refused_and_left_unchanged(run_dir, tmp_path, config, vocab, tool, task,
                                                   message):
    output_dir, _ = run_dir
    other_vocab = tmp_path / "other_vocab.txt"
    other_vocab.write_text("\n".join(vocab) + "\n")
    before = _contents(output_dir)
    with pytest.raises(ValueError) as error:
        check_existing_run(output_dir, config, str(other_vocab), tool, task)
    assert str(error.value) == (f"--output_dir {output_dir} "
                                + message.format(vocab=other_vocab))
    assert _contents(output_dir) == before


def test_a_run_begun_without_a_record_is_not_recorded_afterwards(tmp_path):
    output_dir = str(tmp_path / "older")
    tf.train.CheckpointManager(tf.train.Checkpoint(step=tf.Variable(3)), output_dir,
                               max_to_keep=1, checkpoint_name="ckpt").save()
    vocab_file = write_vocab(str(tmp_path))
    check_existing_run(output_dir, tiny_config(), vocab_file, "run_classifier", "SST-2")
    record_run(output_dir, tiny_config(), vocab_file, "run_classifier", "SST-2",
               do_lower_case=False)
    # Its checkpoint may be of any task or casing: recording this one would block the right one.
    assert not os.path.exists(os.path.join(output_dir, "run.json"))
    assert not os.path.exists(os.path.join(output_dir, "tokenizer_config.json"))
    assert os.path.exists(os.path.join(output_dir, "bert_config.json"))


@pytest.mark.parametrize("do_lower_case", [False, True])
def test_the_casing_is_recorded_as_the_checkpoints_reader_reads_it(tmp_path, do_lower_case):
    output_dir = str(tmp_path / "run")
    record_run(output_dir, tiny_config(), write_vocab(str(tmp_path)), "run_classifier", "SST-2",
               do_lower_case=do_lower_case)
    assert lower_case_beside_checkpoint(output_dir) == (
        do_lower_case, os.path.join(output_dir, "tokenizer_config.json"))
    assert lower_case_beside_checkpoint(os.path.join(output_dir, "ckpt-1")) == (
        do_lower_case, os.path.join(output_dir, "tokenizer_config.json"))
    assert lower_case_beside_checkpoint(str(tmp_path)) is None  # nothing stated there


def _refusal(directory, names):
    them = "it" if len(names) == 1 else "them"
    return (f"--output_dir {directory} holds {', '.join(names)} but no run of bert_tf (no "
            f"run.json), and this run would overwrite {them}; use another --output_dir")


def test_files_a_run_writes_but_no_run_are_refused(tmp_path):
    """Someone's own results, or an original BERT's output directory: a run there would write
    over its `checkpoint` state, eval_results.json, predictions."""
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("kept")
    assert other_files_problem(str(mine), ["predictions*.tsv"]) is None  # nothing in the way
    (mine / "predictions_mismatched.tsv").write_text("kept")
    assert other_files_problem(str(mine), ["predictions*.tsv"]) == _refusal(
        mine, ["predictions_mismatched.tsv"])
    assert other_files_problem(str(mine)) is None  # another tool writes no such file
    for name in ("eval_results.json", "vocab.txt"):
        (mine / name).write_text("kept")
    (mine / "eval").mkdir()
    assert other_files_problem(str(mine)) == _refusal(mine, ["eval", "eval_results.json",
                                                             "vocab.txt"])
    google = tmp_path / "google"  # another program's TF checkpoints
    tf.train.CheckpointManager(tf.train.Checkpoint(step=tf.Variable(3)), str(google),
                               max_to_keep=1, checkpoint_name="model.ckpt").save()
    assert other_files_problem(str(google)) == _refusal(google, ["checkpoint"])
    assert other_files_problem(str(tmp_path / "missing")) is None


def test_a_run_of_this_package_is_not_in_its_own_way(run_dir, tmp_path):
    output_dir, _ = run_dir
    (tmp_path / "run" / "eval_results.json").write_text("{}")
    assert other_files_problem(output_dir, ["predictions*.tsv"]) is None
    # A run begun before run.json was written: its checkpoint has this package's encoder.
    older = tmp_path / "older"
    write_task_checkpoint(str(older), BertClassifier(BertEncoder(tiny_config()), num_classes=2))
    (older / "checkpoint").write_text('model_checkpoint_path: "ckpt-1"\n')  # its state file
    assert tf.train.latest_checkpoint(str(older)) == str(older / "ckpt-1")
    assert other_files_problem(str(older)) is None


def test_a_remote_directory_is_listed_on_its_filesystem():
    tf.io.gfile.makedirs("ram://other_files/run/eval")
    with tf.io.gfile.GFile("ram://other_files/run/eval_results.json", "w") as f:
        f.write("{}")
    assert other_files_problem("ram://other_files/run") == _refusal(
        "ram://other_files/run", ["eval", "eval_results.json"])


def test_a_run_writes_run_json_first(tmp_path):
    """Written last, a run stopped before it (Ctrl-C, a full disk) would leave files that refuse
    its own rerun: they are a run's only beside it."""
    output_dir = str(tmp_path / "run")
    os.makedirs(os.path.join(output_dir, "bert_config.json"))  # where writing the config fails
    with pytest.raises(IsADirectoryError):
        record_run(output_dir, tiny_config(), write_vocab(str(tmp_path)), "run_classifier",
                   "SST-2")
    assert other_files_problem(output_dir) is None


def test_every_name_a_run_writes_is_known():
    assert all(is_run_output(name) for name in (
        "checkpoint", "ckpt-12.index", "ckpt-12.data-00000-of-00001", "bert_config.json",
        "vocab.txt", "tokenizer_config.json", "run.json", "eval_results.json", "train", "eval"))
    assert is_run_output("label_list.txt", ["label_list.txt"])
    assert not any(is_run_output(name) for name in ("notes.txt", "data", "predictions.tsv"))
