"""The exported SavedModels run in a fresh process that imports only `tensorflow` and
`tensorflow_text` (fresh_process_runner.py): no Python code of this package is needed, and the
outputs equal those of the same SavedModels loaded here (which the other tests check against
the Keras models). One process runs them all: starting TensorFlow is the slow part."""

import json
import os
import subprocess
import sys

import numpy as np
import tensorflow as tf

from bert_tf.export import export_task_model, write_version
from tests.export.graph_ops import non_core_ops
from tests.export.task_examples import EXPORT_OPTIONS, FEEDS, SEQ_LENGTH
from tests.export.tiny_models import encoder_inputs
from tests.resources import tensorflow_2_12_python

RUNNER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fresh_process_runner.py")


def as_numpy(tensor):
    value = tensor.numpy()
    return value.astype(bytes) if value.dtype == object else value


def flat(outputs):
    """Encoder outputs as the runner saves them: the per-layer list numbered."""
    flat_outputs = {key: value for key, value in outputs.items() if key != "encoder_outputs"}
    flat_outputs.update({f"encoder_outputs_{i}": layer
                         for i, layer in enumerate(outputs["encoder_outputs"])})
    return flat_outputs


def test_a_fresh_process_with_only_tensorflow_runs_every_export(encoder_export_dir,
                                                                task_exports, tmp_path):
    inputs = encoder_inputs([[2, 5, 6, 3], [2, 7, 8, 9, 3, 16, 3]], seq_length=9)
    mlm_inputs = {**inputs, "masked_lm_positions": tf.constant([[1, 2], [3, 5]])}
    encoder = tf.saved_model.load(encoder_export_dir)
    expected = {"encoder": flat(encoder(inputs, training=False)),
                "mlm": flat(encoder.mlm(mlm_inputs))}
    jobs = [{"path": encoder_export_dir, "function": "__call__", "name": "encoder",
             "inputs": {key: ["int32", value.numpy().tolist()] for key, value in inputs.items()}},
            {"path": encoder_export_dir, "function": "mlm", "name": "mlm",
             "inputs": {key: ["int32", value.numpy().tolist()]
                        for key, value in mlm_inputs.items()}}]
    # The task models share their ops (tf.text tokenization, the encoder): the classifier and
    # SQuAD (pairs, offsets, answer text) stand for all four.
    for task in ("classifier", "squad"):
        feed = FEEDS[task]
        jobs.append({"path": task_exports[task][0], "function": "serving_default", "name": task,
                     "inputs": {name: ["string", value] for name, value in feed.items()}})
        expected[task] = task_exports[task][1].signatures["serving_default"](
            **{name: tf.constant(value) for name, value in feed.items()})
    check_in_a_fresh_process(sys.executable, jobs, expected, tmp_path, float_atol=None)


def every_export_jobs(encoder_export_dir, task_exports, loaders):
    """`(jobs, expected outputs by job name)`: the encoder's `serving_default` and `mlm` and the
    `serving_default` of each task export (`{name: (task, path, loaded)}`) on its task's FEEDS,
    once through each of `loaders` ("session": TF Serving's, "load": `tf.saved_model.load`)."""
    inputs = encoder_inputs([[2, 5, 6, 3], [2, 7, 8, 9, 3, 16, 3]], seq_length=9)
    mlm_inputs = {**inputs, "masked_lm_positions": tf.constant([[1, 2], [3, 5]])}
    encoder = tf.saved_model.load(encoder_export_dir)
    calls, expected = [], {}
    for name, signature, feed in (("encoder", "serving_default", inputs),
                                  ("mlm", "mlm", mlm_inputs)):
        calls.append({"path": encoder_export_dir, "function": signature, "name": name,
                      "inputs": {key: ["int32", value.numpy().tolist()]
                                 for key, value in feed.items()}})
        expected[name] = encoder.signatures[signature](**feed)
    for export, (task, path, loaded) in sorted(task_exports.items()):
        feed = FEEDS[task]
        calls.append({"path": path, "function": "serving_default", "name": export,
                      "inputs": {name: ["string", value] for name, value in feed.items()}})
        expected[export] = loaded.signatures["serving_default"](
            **{name: tf.constant(value) for name, value in feed.items()})
    jobs, expected_by_job = [], {}
    for loader in loaders:
        for call in calls:
            jobs.append({**call, "loader": loader, "name": f"{loader}_{call['name']}"})
            expected_by_job[jobs[-1]["name"]] = expected[call["name"]]
    return jobs, expected_by_job


def check_in_a_fresh_process(python, jobs, expected, tmp_path, float_atol=1e-5):
    """Runs `jobs` with `python` (fresh_process_runner.py) and compares their outputs with
    `expected` (by job name): floats within `float_atol`, everything equal when it is None."""
    for job in jobs:
        job["outputs"] = str(tmp_path / f"{job['name']}.npz")
    (tmp_path / "jobs.json").write_text(json.dumps(jobs))
    result = subprocess.run([python, RUNNER, str(tmp_path / "jobs.json")],
                            capture_output=True, text=True, timeout=900,
                            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert result.returncode == 0, result.stderr[-3000:]
    for job in jobs:
        fresh = np.load(job["outputs"])
        assert sorted(fresh.files) == sorted(expected[job["name"]])
        for name, value in expected[job["name"]].items():
            value = as_numpy(value)
            if value.dtype.kind == "f" and float_atol is not None:
                np.testing.assert_allclose(fresh[name], value, atol=float_atol,
                                           err_msg=f"{job['name']}: {name}")
            else:
                np.testing.assert_array_equal(fresh[name], value,
                                              err_msg=f"{job['name']}: {name}")


def test_tf_servings_session_loader_runs_every_export(encoder_export_dir, task_exports,
                                                      tmp_path):
    # TF Serving loads a SavedModel into a session (restore op, init ops) and fetches the
    # signature's tensors. With the Keras variables tracked as they were, the restore filled
    # copies and every signature failed with "Could not find variable classifier/bias", while
    # tf.saved_model.load worked (see bert_tf/export/backing_variables.py).
    exports = {task: (task, *task_exports[task][:2]) for task in task_exports}
    check_in_a_fresh_process(sys.executable, *every_export_jobs(
        encoder_export_dir, exports, ["session"]), tmp_path)


def test_tensorflow_2_12_runs_every_export(encoder_export_dir, task_exports, vocab_file,
                                           tmp_path):
    # TF Serving 2.12-2.19 run TensorFlow 2.12's kernels with tensorflow-text 2.12.1: every
    # export, through TF Serving's session loader and tf.saved_model.load, with its model run
    # at once and one sequence at a time (model_slices' loop).
    python = tensorflow_2_12_python()
    version = subprocess.run([python, "-c", "import tensorflow as tf; print(tf.__version__)"],
                             capture_output=True, text=True, timeout=300,
                             env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}).stdout.split()
    assert version and version[-1].startswith("2.12."), version
    exports = {task: (task, *task_exports[task][:2]) for task in task_exports}
    for task in task_exports:
        path = write_version(str(tmp_path / f"{task}_sliced"), lambda d, task=task: (
            export_task_model(d, task, task_exports[task][2], vocab_file, do_lower_case=True,
                              seq_length=SEQ_LENGTH, max_tokens_per_call=1,
                              **EXPORT_OPTIONS[task])))
        exports[f"{task}_sliced"] = (task, path, tf.saved_model.load(path))
    check_in_a_fresh_process(python, *every_export_jobs(encoder_export_dir, exports,
                                                        ["session", "load"]), tmp_path)


def test_graphs_need_only_core_ops_and_the_wordpiece_op(encoder_export_dir, task_exports):
    # TF Serving 2.12-2.20 builds carry tf.text's FastWordpieceTokenizeWithOffsets and no other
    # tf.text op (no RoundRobinTrim...): every export, Classify/Regress signatures included.
    tasks = sorted(task_exports)
    found = non_core_ops([encoder_export_dir] + [task_exports[task][0] for task in tasks])
    assert found[0] == []
    assert dict(zip(tasks, found[1:])) == {task: ["FastWordpieceTokenizeWithOffsets"]
                                           for task in tasks}
