"""A config whose vocab_size is smaller than the vocabulary file stops pre-training and
fine-tuning with one line naming both files, before any training."""

import dataclasses
import re

import pytest

from tests.data.pretraining.records import write_pretraining_records
from tests.export.tiny_models import VOCAB, tiny_config, write_vocab
from tests.tools.tool_runs import run_tool


@pytest.fixture
def small_config(tmp_path):
    """A config with 3 ids fewer than the vocabulary has tokens."""
    config = dataclasses.replace(tiny_config(num_hidden_layers=1), vocab_size=len(VOCAB) - 3)
    path = str(tmp_path / "bert_config.json")
    config.to_json_file(path)
    return path


def expected_error(tool, config_file, vocab_file):
    return "^" + re.escape(
        f"{tool}: error: {config_file}: vocab_size {len(VOCAB) - 3} is smaller than the "
        f"{len(VOCAB)} tokens of {vocab_file}; the ids of the last 3 tokens have no embedding")


def test_run_pretraining_refuses_a_config_smaller_than_the_vocabulary(tmp_path, small_config):
    vocab_file = write_vocab(str(tmp_path))
    records = str(tmp_path / "train.tfrecord")
    write_pretraining_records(records, 16, max_seq_length=16, max_predictions_per_seq=3,
                              vocab_size=len(VOCAB) - 3)
    result = run_tool("run_pretraining.py", f"--bert_config_file={small_config}",
                      f"--vocab_file={vocab_file}", f"--input_file={records}",
                      f"--output_dir={tmp_path / 'out'}", "--do_train", "--num_train_steps=2",
                      "--num_warmup_steps=0", "--train_batch_size=4")
    assert result.returncode == 1
    assert re.match(expected_error("run_pretraining", small_config, vocab_file),
                    result.stderr.strip().splitlines()[-1]), result.stderr[-2000:]
    assert not (tmp_path / "out" / "checkpoint").exists()


def test_run_classifier_refuses_a_config_smaller_than_the_vocabulary(tmp_path, small_config):
    vocab_file = write_vocab(str(tmp_path))
    data = tmp_path / "SST-2"
    data.mkdir()
    (data / "train.tsv").write_text("sentence\tlabel\na good movie\t1\na bad movie\t0\n")
    result = run_tool("run_classifier.py", f"--bert_config_file={small_config}",
                      f"--vocab_file={vocab_file}", "--task_name=SST-2", f"--data_dir={data}",
                      "--max_seq_length=16",
                      f"--output_dir={tmp_path / 'out'}", "--do_train", "--num_train_steps=2",
                      "--train_batch_size=2")
    assert result.returncode == 1
    assert re.match(expected_error("run_classifier", small_config, vocab_file),
                    result.stderr.strip().splitlines()[-1]), result.stderr[-2000:]
