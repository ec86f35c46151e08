"""run_pretraining with every path remote: inputs, --output_dir and --export_dir on TensorFlow's
in-memory filesystem ram://, which, like gs://, only tf.io.gfile reaches. Whatever the job read
or wrote through `open` or `os` would fail or land on the local disk instead; the job runs in a
fresh process from an otherwise empty directory, which must stay so."""

import json
import os
import subprocess
import sys

import pytest

from tests.data.pretraining.records import write_pretraining_records
from tests.data.pretraining.toy_corpus import VOCAB, write_vocab
from tests.resources import REPO_ROOT
from tests.tools.test_run_pretraining import CONFIG
from tests.training import remote_pretraining_job

JOB_CONFIG = {**CONFIG, "vocab_size": len(VOCAB)}


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    """(the job's local working directory, what remote_pretraining_job printed)."""
    directory = tmp_path_factory.mktemp("remote_job")
    write_pretraining_records(directory / "train.tfrecord", 24, 16, 3, vocab_size=len(VOCAB),
                              seed=1)
    (directory / "bert_config.json").write_text(json.dumps(JOB_CONFIG))
    write_vocab(directory)
    result = subprocess.run([sys.executable, "-m", remote_pretraining_job.__name__],
                            cwd=directory, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
                            capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    return directory, json.loads(result.stdout.strip().splitlines()[-1])


def test_the_first_run_writes_checkpoint_config_vocab_results_and_export_remotely(job):
    _, state = job
    first = state["after_first_run"]
    assert first["files"] == dict.fromkeys(remote_pretraining_job.OUTPUT_FILES, True)
    assert first["config"] == {**JOB_CONFIG, "layer_norm_eps": 1e-12}
    assert first["vocab"] == VOCAB
    assert first["latest_checkpoint"] == f"{remote_pretraining_job.OUTPUT_DIR}/ckpt-4"
    assert first["loss_steps"] == [2, 4]
    assert first["eval_global_step"] == 4
    assert first["export_versions"] == ["4"]
    assert "serving_default" in first["export_signatures"]


def test_a_second_run_resumes_from_the_remote_checkpoint(job):
    _, state = job
    second = state["after_second_run"]
    assert second["latest_checkpoint"] == f"{remote_pretraining_job.OUTPUT_DIR}/ckpt-6"
    # Resumed at step 4: only steps 5-6 are trained (and logged) again; a fresh start would
    # have logged 2 and 4 twice.
    assert second["loss_steps"] == [2, 4, 6]
    assert second["eval_global_step"] == 6
    assert second["export_versions"] == ["4", "6"]
    # Rewritten on every run: replaced, not appended to.
    assert second["config"] == state["after_first_run"]["config"]
    assert second["vocab"] == VOCAB


def test_nothing_lands_on_the_local_disk(job):
    directory, _ = job
    assert sorted(path.name for path in directory.iterdir()) == [
        "bert_config.json", "train.tfrecord", "vocab.txt"]
