"""check_existing_run / record_run: an output directory holding a run of another model,
vocabulary or task is refused with one message naming every difference, and left unchanged;
the same run passes (it resumes); a run begun before run.json existed is not recorded."""

import dataclasses
import json
import os

import pytest
import tensorflow as tf

from bert_tf.checkpoints.sources import lower_case_beside_checkpoint
from bert_tf.training.existing_run import check_existing_run, record_run
from tests.export.tiny_models import VOCAB, tiny_config, write_vocab


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
