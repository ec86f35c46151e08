"""tools/run_pretraining.py end to end, in subprocesses, on records written exactly as Google's
create_pretraining_data.py writes them. XLA (the default) runs in the multi-worker test; the
other runs use --nojit_compile, as an XLA compilation costs tens of seconds of CPU."""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from tests.data.pretraining_records import write_pretraining_records
from tests.resources import REPO_ROOT
from tests.training.test_distributed import free_port
from tests.training.test_schedule import googles_learning_rate

TOOL = os.path.join(REPO_ROOT, "tools", "run_pretraining.py")
CONFIG = {"vocab_size": 40, "hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
          "intermediate_size": 32, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
          "attention_probs_dropout_prob": 0.1, "max_position_embeddings": 16,
          "type_vocab_size": 2, "initializer_range": 0.02}
HELD_OUT = 21  # not a multiple of any batch size below: evaluation pads its last batch
METRIC_TAGS = {"loss", "masked_lm_loss", "masked_lm_accuracy", "next_sentence_loss",
               "next_sentence_accuracy"}


def command(*flags):
    return [sys.executable, TOOL, *flags]


def run_tool(*flags, env=None, timeout=600):
    return subprocess.run(command(*flags), capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def read_scalars(directory):
    """`{tag: [(step, value), ...]}` from every TensorBoard event file in `directory`, in
    writing order."""
    scalars = {}
    for name in sorted(os.listdir(directory), key=lambda n: os.path.getmtime(
            os.path.join(directory, n))):
        for event in tf.compat.v1.train.summary_iterator(os.path.join(directory, name)):
            for value in event.summary.value:
                scalars.setdefault(value.tag, []).append(
                    (event.step, float(tf.make_ndarray(value.tensor))))
    return scalars


def latest_step(directory):
    latest = tf.train.latest_checkpoint(directory)
    return int(latest.rsplit("-", 1)[1]) if latest else None


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    directory = tmp_path_factory.mktemp("data")
    write_pretraining_records(directory / "train-0.tfrecord", 48, 16, 3, vocab_size=40, seed=1)
    write_pretraining_records(directory / "train-1.tfrecord", 48, 16, 3, vocab_size=40, seed=2)
    write_pretraining_records(directory / "heldout.tfrecord", HELD_OUT, 16, 3, vocab_size=40,
                              seed=3)
    config = directory / "bert_config.json"
    config.write_text(json.dumps(CONFIG))
    return {"config": str(config), "train": str(directory / "train-*.tfrecord"),
            "heldout": str(directory / "heldout.tfrecord"), "dir": directory}


STEPS, WARMUP, CHECKPOINT_EVERY = 150, 10, 25


def training_flags(data, output_dir):
    return [f"--bert_config_file={data['config']}", f"--input_file={data['train']}",
            f"--output_dir={output_dir}", "--train_batch_size=8",
            f"--num_train_steps={STEPS}", f"--num_warmup_steps={WARMUP}", "--learning_rate=1e-3",
            f"--save_checkpoints_steps={CHECKPOINT_EVERY}", "--steps_per_execution=1",
            "--strategy=cpu", "--nojit_compile"]


@pytest.fixture(scope="module")
def reference(data, tmp_path_factory):
    """An uninterrupted run with evaluation: the loss curve the interrupted run must match."""
    output_dir = str(tmp_path_factory.mktemp("reference"))
    result = run_tool(*training_flags(data, output_dir), "--do_eval",
                      f"--eval_input_file={data['heldout']}", "--eval_batch_size=8")
    assert result.returncode == 0, result.stderr[-3000:]
    return output_dir


def test_trains_googles_records_checkpoints_and_evaluates(reference):
    assert latest_step(reference) == STEPS
    # keep_checkpoint_max=5 of the checkpoints every 25 steps
    assert sorted(int(f[5:-6]) for f in os.listdir(reference) if f.endswith(".index")) == [
        50, 75, 100, 125, 150]
    assert json.load(open(os.path.join(reference, "bert_config.json"))) == {
        **CONFIG, "layer_norm_eps": 1e-12}
    scalars = read_scalars(os.path.join(reference, "train"))
    assert METRIC_TAGS | {"learning_rate", "examples_per_second", "steps_per_second"} <= set(
        scalars)
    assert [step for step, _ in scalars["loss"]] == list(range(1, STEPS + 1))
    np.testing.assert_allclose([v for _, v in scalars["learning_rate"]], [
        googles_learning_rate(step - 1, 1e-3, STEPS, WARMUP) for step in range(1, STEPS + 1)],
        rtol=1e-5, atol=1e-12)
    losses = [v for _, v in scalars["loss"]]
    assert np.mean(losses[-20:]) < np.mean(losses[:20]) - 0.1  # it learns
    results = dict(line.split(" = ") for line in
                   open(os.path.join(reference, "eval_results.txt")).read().splitlines())
    assert int(results["global_step"]) == STEPS and int(results["examples"]) == HELD_OUT
    assert set(results) == METRIC_TAGS | {"global_step", "examples"}
    assert 0.0 <= float(results["masked_lm_accuracy"]) <= 1.0
    evaluation = read_scalars(os.path.join(reference, "eval"))
    assert evaluation["masked_lm_loss"] == [(STEPS, pytest.approx(float(results["masked_lm_loss"]),
                                                                  rel=1e-6))]


def test_a_job_killed_with_sigkill_resumes_exactly(data, reference, tmp_path):
    output_dir = str(tmp_path / "killed")
    flags = training_flags(data, output_dir)
    job = subprocess.Popen(command(*flags), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 600
        while latest_step(output_dir) is None and job.poll() is None:
            assert time.monotonic() < deadline, "no checkpoint within 10 minutes"
            time.sleep(0.02)
        job.send_signal(signal.SIGKILL)
        assert job.wait(timeout=60) == -signal.SIGKILL, "the job ended before it could be killed"
    finally:
        if job.poll() is None:
            job.kill()
    killed_at = latest_step(output_dir)
    assert killed_at < STEPS
    before = read_scalars(os.path.join(output_dir, "train"))

    resumed = run_tool(*flags)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"ckpt-{killed_at} at step {killed_at}" in resumed.stderr
    assert latest_step(output_dir) == STEPS
    reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(output_dir))
    assert reader.get_tensor("global_step/.ATTRIBUTES/VARIABLE_VALUE") == STEPS
    # Both runs' curves, the steps done twice included, are the uninterrupted run's: same
    # weights, optimizer state, dropout RNG and input position after the restart.
    expected = dict(read_scalars(os.path.join(reference, "train"))["loss"])
    curve = read_scalars(os.path.join(output_dir, "train"))["loss"]
    resumed_steps = [step for step, _ in curve[len(before.get("loss", [])):]]
    assert resumed_steps == list(range(killed_at + 1, STEPS + 1))
    for step, loss in curve:
        assert loss == pytest.approx(expected[step], rel=1e-4), f"step {step}"


def test_a_corrupt_file_is_named(data, tmp_path):
    truncated = tmp_path / "z_truncated.tfrecord"
    good = open(data["heldout"], "rb").read()
    truncated.write_bytes(good[:len(good) // 2 + 30])
    # The first file is fine, so the damage shows only when the input pipeline reaches it.
    result = run_tool(f"--bert_config_file={data['config']}", f"--output_dir={tmp_path / 'out'}",
                      f"--input_file={data['heldout']},{truncated}", "--num_train_steps=50",
                      "--num_warmup_steps=0", "--train_batch_size=8", "--strategy=cpu",
                      "--nojit_compile")
    assert result.returncode != 0
    assert f"InputFileError: {truncated}: corrupt, truncated" in result.stderr


def test_evaluation_names_a_truncated_file(data, reference, tmp_path):
    truncated = tmp_path / "heldout.tfrecord"
    good = open(data["heldout"], "rb").read()
    truncated.write_bytes(good[:len(good) - 20])
    result = run_tool(f"--bert_config_file={data['config']}", f"--output_dir={reference}",
                      "--nodo_train", "--do_eval", f"--eval_input_file={truncated}",
                      "--strategy=cpu")
    assert result.returncode != 0
    assert f"{truncated}: corrupt or truncated TFRecord file" in result.stderr


def test_without_flags_it_lists_what_is_missing():
    result = run_tool()
    assert result.returncode != 0
    for message in ("--bert_config_file (the model's bert_config.json) is required",
                    "--output_dir is required", "--input_file (comma-separated globs"):
        assert message in result.stderr


def test_flags_must_match_the_records(data, tmp_path):
    result = run_tool(f"--bert_config_file={data['config']}", f"--input_file={data['train']}",
                      f"--output_dir={tmp_path}", "--max_seq_length=32")
    assert result.returncode != 0
    assert ("train-0.tfrecord (from --input_file) holds records with max_seq_length 16, but "
            "--max_seq_length=32") in result.stderr


def test_an_unreachable_tpu_is_a_clear_error(data, tmp_path):
    port = free_port()
    result = run_tool(f"--bert_config_file={data['config']}", f"--input_file={data['train']}",
                      f"--output_dir={tmp_path}", "--strategy=tpu",
                      f"--tpu=grpc://127.0.0.1:{port}", timeout=120)
    assert result.returncode != 0
    assert f"Cannot reach the TPU worker at grpc://127.0.0.1:{port} (--tpu)" in result.stderr


def test_two_workers_train_and_checkpoint_with_multi_worker_mirrored(data, tmp_path):
    # Also the test of XLA and of float16 (dynamic loss scaling) under a distribution strategy.
    output_dir = str(tmp_path / "mwms")
    cluster = {"worker": [f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"]}
    flags = [f"--bert_config_file={data['config']}", f"--input_file={data['train']}",
             f"--output_dir={output_dir}", "--train_batch_size=8", "--num_train_steps=6",
             "--num_warmup_steps=1", "--save_checkpoints_steps=3", "--steps_per_execution=3",
             "--strategy=multi_worker_mirrored", "--mixed_precision=float16", "--do_eval",
             f"--eval_input_file={data['heldout']}", "--eval_batch_size=8"]
    workers = [subprocess.Popen(
        command(*flags), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "TF_CONFIG": json.dumps({"cluster": cluster,
                                                    "task": {"type": "worker", "index": i}})})
        for i in range(2)]
    try:
        outputs = [worker.communicate(timeout=900) for worker in workers]
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
    for worker, (_, stderr) in zip(workers, outputs):
        assert worker.returncode == 0, stderr[-3000:]
        assert "on 2 replica(s) (--strategy=multi_worker_mirrored)" in stderr
    assert latest_step(output_dir) == 6
    assert sorted(f for f in os.listdir(output_dir) if f.endswith(".index")) == [
        "ckpt-3.index", "ckpt-6.index"]
    assert not [f for f in os.listdir(output_dir) if f.startswith(".tmp")]  # worker 1's copies
    # Synchronous replicas hold the same weights: both workers evaluate to the same metrics,
    # over every held-out record once (each worker reads half of them, plus padding).
    reports = [next(line for line in stderr.splitlines() if "Evaluation at step 6" in line)
               for _, stderr in outputs]
    assert f"on {HELD_OUT} records" in reports[0]
    assert reports[0].split("records: ")[1] == reports[1].split("records: ")[1]
    metrics = eval(reports[0].split("records: ")[1])  # the logged dict of floats
    assert np.isfinite(list(metrics.values())).all() and metrics["examples"] == HELD_OUT
    results = open(os.path.join(output_dir, "eval_results.txt")).read()
    assert f"examples = {HELD_OUT}" in results
