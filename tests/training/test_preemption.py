"""SIGTERM (preemption) during training: a checkpoint at the step reached, one line, a non-zero
exit, and the same command then resumes to the end; in multi-worker pre-training, on every
worker at the same step.

Each test runs a tiny training in a subprocess through `run_tool` (the tools' exit path): this
module run as a program (`--kind=pretraining|fine_tuning --output_dir=...`). Each batch sleeps a
little so that a run lasts long enough to be interrupted; the test waits for a TensorBoard
scalar (written after a host call, once training runs) before sending SIGTERM.
"""

import os
import re
import signal
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The steps of each kind's run. Pre-training is interrupted after step 3: 100 steps leave it
# 97 sleeps of SECONDS_PER_BATCH (1.9 s) to stop before the end, and its tests took 45 instead of
# 59 s with 300 (Zen 5). Fine-tuning is interrupted after step 50, its first TensorBoard write
# (every 50 steps).
NUM_TRAIN_STEPS = {"pretraining": 100, "fine_tuning": 300}
SAVE_CHECKPOINTS_STEPS = 1000  # never due before the end: a checkpoint before it is SIGTERM's
SECONDS_PER_BATCH = 0.02
LINE = re.compile(r"^\S+: error: terminated \(SIGTERM(?: to another worker)?\) at step (\d+): "
                  r"saved (\S+/ckpt-(\d+)); run the same command to resume$", re.MULTILINE)
# Ctrl-C: the same, as the tool's "interrupted" line; the process ends by SIGINT.
INTERRUPTED_LINE = re.compile(r"^\S+: interrupted \(SIGINT\) at step (\d+): saved "
                              r"(\S+/ckpt-(\d+)); run the same command to resume$", re.MULTILINE)


def _slowed(dataset):
    """`dataset`, each element made to wait `SECONDS_PER_BATCH` first."""
    import tensorflow as tf

    def sleep():
        time.sleep(SECONDS_PER_BATCH)
        return 0

    def slowed(*element):
        with tf.control_dependencies([tf.numpy_function(sleep, [], tf.int64)]):
            element = tf.nest.map_structure(tf.identity, element)
        return element if len(element) > 1 else element[0]

    return dataset.map(slowed)


def _strategy():
    """A MultiWorkerMirroredStrategy under TF_CONFIG (`_run_workers`), else the default."""
    import tensorflow as tf

    return (tf.distribute.MultiWorkerMirroredStrategy() if "TF_CONFIG" in os.environ
            else tf.distribute.get_strategy())


def _pretrain(output_dir, input_file):
    from bert_tf.data.pretraining.records_dataset import training_dataset
    from bert_tf.training.pretraining_trainer import PretrainingTrainer
    from tests.training.test_pretraining_trainer import BATCH, CONFIG, PREDICTIONS, SEQ

    trainer = PretrainingTrainer(_strategy(), CONFIG, global_batch_size=BATCH,
                                 num_train_steps=NUM_TRAIN_STEPS["pretraining"],
                                 jit_compile=False)
    trainer.train(lambda context, start_step: _slowed(training_dataset(
        [input_file], BATCH, SEQ, PREDICTIONS, context, start_step=start_step)), output_dir,
        save_checkpoints_steps=SAVE_CHECKPOINTS_STEPS, progress=False)
    print(f"done at step {int(trainer.global_step.numpy())}", flush=True)


def _fine_tune(output_dir):
    import keras

    from bert_tf import BertClassifier
    from bert_tf.training.fine_tuning import FineTuner
    from tests.models.head_fixtures import tiny_encoder
    from tests.training.test_fine_tuning import _dataset_fn

    # Under TF_CONFIG (`_run_workers`), one of the workers of a multi-worker job.
    with _strategy().scope():
        classifier = BertClassifier(tiny_encoder(seed=1), num_classes=2)
    tuner = FineTuner(classifier, output_dir, num_train_steps=NUM_TRAIN_STEPS["fine_tuning"],
                      learning_rate=1e-3,
                      loss={"logits": keras.losses.SparseCategoricalCrossentropy(from_logits=True)},
                      steps_per_checkpoint=SAVE_CHECKPOINTS_STEPS, steps_per_execution=2)
    batches = _dataset_fn()
    tuner.train(lambda start_step: _slowed(batches(start_step)), verbose=0)
    print(f"done at step {tuner.step}", flush=True)


def _run(kind, output_dir, input_file="", environment=None):
    return subprocess.Popen(
        [sys.executable, "-m", "tests.training.test_preemption", f"--kind={kind}",
         f"--output_dir={output_dir}", f"--input_file={input_file}"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "KERAS_BACKEND": "tensorflow", "TF_CPP_MIN_LOG_LEVEL": "2",
             "PYTHONPATH": ROOT, **(environment or {})})


def _run_workers(output_dir, input_file="", kind="pretraining"):
    """The two workers of a multi-worker job on loopback; worker 0 is the chief."""
    from tests.training.test_distributed import two_worker_tf_configs

    return [_run(kind, output_dir, input_file, {"TF_CONFIG": tf_config})
            for tf_config in two_worker_tf_configs()]


def _latest_summary_step(log_dir):
    """The highest step of the TensorBoard events in `log_dir` so far (-1 if none)."""
    import tensorflow as tf

    step = -1
    for name in tf.io.gfile.listdir(log_dir) if os.path.isdir(log_dir) else []:
        try:
            for event in tf.compat.v1.train.summary_iterator(os.path.join(log_dir, name)):
                step = max(step, event.step)
        except tf.errors.DataLossError:  # a record being written
            pass
    return step


def _terminate_after_step(process, log_dir, min_step, timeout=600, signum=signal.SIGTERM):
    deadline = time.monotonic() + timeout
    while _latest_summary_step(log_dir) < min_step:
        if process.poll() is not None:
            pytest.fail(f"ended before step {min_step}: {process.communicate()}")
        if time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"no step {min_step} within {timeout} s: {process.communicate()}")
        time.sleep(0.2)
    process.send_signal(signum)
    return process.communicate(timeout=timeout)


def _check_preempted_then_resumed(kind, output_dir, min_step, input_file="",
                                  signum=signal.SIGTERM):
    import tensorflow as tf

    steps = NUM_TRAIN_STEPS[kind]
    process = _run(kind, output_dir, input_file)
    _, stderr = _terminate_after_step(process, os.path.join(output_dir, "train"), min_step,
                                      signum=signum)
    interrupted = signum == signal.SIGINT
    assert process.returncode == (-signal.SIGINT if interrupted else 1), stderr
    match = (INTERRUPTED_LINE if interrupted else LINE).search(stderr)
    assert match, stderr
    step = int(match.group(1))
    assert min_step <= step < steps and int(match.group(3)) == step
    assert match.group(2) == os.path.join(output_dir, f"ckpt-{step}")
    assert tf.train.latest_checkpoint(output_dir) == match.group(2)

    resumed = _run(kind, output_dir, input_file)
    stdout, stderr = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, stderr
    assert f"done at step {steps}" in stdout
    assert "terminated" not in stderr
    assert tf.train.latest_checkpoint(output_dir) == os.path.join(
        output_dir, f"ckpt-{steps}")
    return step


def test_pretraining_saves_and_stops_on_sigterm_then_resumes(tmp_path):
    from tests.data.pretraining.records import write_pretraining_records
    from tests.training.test_pretraining_trainer import PREDICTIONS, SEQ

    input_file = str(tmp_path / "train.tfrecord")
    write_pretraining_records(input_file, 64, SEQ, PREDICTIONS, vocab_size=40)
    _check_preempted_then_resumed("pretraining", str(tmp_path / "out"), 3, input_file)


def test_sigterm_to_one_worker_stops_every_worker_at_one_checkpoint_then_resumes(tmp_path):
    """Multi-worker: SIGTERM reaches worker 1 only; both workers save at the same step (a
    checkpoint is a collective: a worker saving alone would hang) and stop in one line."""
    import tensorflow as tf

    from tests.data.pretraining.records import write_pretraining_records
    from tests.training.test_pretraining_trainer import PREDICTIONS, SEQ

    input_file = str(tmp_path / "train.tfrecord")
    write_pretraining_records(input_file, 64, SEQ, PREDICTIONS, vocab_size=40)
    output_dir = str(tmp_path / "out")
    steps = NUM_TRAIN_STEPS["pretraining"]
    chief, worker = _run_workers(output_dir, input_file)
    try:
        _, worker_stderr = _terminate_after_step(worker, os.path.join(output_dir, "train"), 3)
        _, chief_stderr = chief.communicate(timeout=600)
    finally:
        for process in (chief, worker):
            if process.poll() is None:
                process.kill()
    lines = [LINE.search(stderr) for stderr in (chief_stderr, worker_stderr)]
    assert chief.returncode == worker.returncode == 1 and all(lines), (chief_stderr,
                                                                       worker_stderr)
    assert "(SIGTERM to another worker)" in lines[0].group(0)
    step = int(lines[0].group(1))
    assert int(lines[1].group(1)) == step and 3 <= step < steps
    assert lines[0].group(2) == lines[1].group(2) == os.path.join(output_dir, f"ckpt-{step}")
    assert tf.train.latest_checkpoint(output_dir) == lines[0].group(2)
    assert not [name for name in os.listdir(output_dir) if name.startswith(".tmp")]

    resumed = _run_workers(output_dir, input_file)
    outputs = [process.communicate(timeout=600) for process in resumed]
    for process, (stdout, stderr) in zip(resumed, outputs):
        assert process.returncode == 0, stderr
        assert f"done at step {steps}" in stdout
    assert tf.train.latest_checkpoint(output_dir) == os.path.join(
        output_dir, f"ckpt-{steps}")


def test_fine_tuning_saves_and_stops_on_sigterm_then_resumes(tmp_path):
    # ScalarSummaries writes every 50 steps: the first write is the sign training runs.
    _check_preempted_then_resumed("fine_tuning", str(tmp_path / "out"), 50)


def test_ctrl_c_saves_and_stops_fine_tuning_too(tmp_path):
    # Ctrl-C lost every step since the last checkpoint (1,000 steps apart by default).
    _check_preempted_then_resumed("fine_tuning", str(tmp_path / "out"), 50,
                                  signum=signal.SIGINT)


def test_multi_worker_fine_tuning_is_refused_in_one_line(tmp_path):
    """Keras 3's fit cannot run a MultiWorkerMirroredStrategy over several workers: each
    worker ends with one line naming it instead of failing in Keras' first step."""
    workers = _run_workers(str(tmp_path / "out"), kind="fine_tuning")
    outputs = [process.communicate(timeout=600) for process in workers]
    for process, (_, stderr) in zip(workers, outputs):
        assert process.returncode == 1, stderr
        assert stderr.strip().splitlines()[-1].endswith(
            ": error: fine-tuning runs in one process: a "
            "MultiWorkerMirroredStrategy over several workers is not supported (Keras 3's fit "
            "cannot run it, keras-team/keras#20585); use one worker's devices"), stderr
        assert "Traceback" not in stderr
    assert not os.path.exists(tmp_path / "out" / "train")


def _main():
    from absl import flags

    from bert_tf.cli.app import run_tool

    def define_flags():
        flags.DEFINE_enum("kind", None, ["pretraining", "fine_tuning"], "what to train")
        flags.DEFINE_string("output_dir", None, "checkpoints and logs")
        flags.DEFINE_string("input_file", "", "pre-training records")

    def main():
        values = flags.FLAGS
        if values.kind == "pretraining":
            _pretrain(values.output_dir, values.input_file)
        else:
            _fine_tune(values.output_dir)

    run_tool(main, define_flags)


if __name__ == "__main__":
    _main()
