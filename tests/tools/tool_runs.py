"""What the tests of the command-line tools share: running a tool in a fresh process, reading
back its checkpoints and TensorBoard curves, and killing it at its first checkpoint.

Example:
    >>> result = run_tool("run_classifier.py", "--task_name=SST-2", ...)
    >>> assert result.returncode == 0, result.stderr
    >>> losses = [loss for _, loss in scalar_curves(f"{output_dir}/train")["loss"]]
    >>> killed_at = kill_at_first_checkpoint("run_pretraining.py", flags, output_dir)
"""

import json
import os
import signal
import subprocess
import sys
import time

import tensorflow as tf

from bert_tf.training.scalar_logs import read_scalars
from tests.resources import REPO_ROOT


def tool_command(tool, *flags):
    """The command line of `tools/<tool>` with `flags`, run by this Python."""
    return [sys.executable, os.path.join(REPO_ROOT, "tools", tool), *flags]


def set_up_then_exec(setup, command):
    """`command` run by a small Python that first runs `setup` (code) in its own process, then
    execs it: instead of `subprocess`'s `preexec_fn`. A child forked with `preexec_fn` from a
    test process holding gRPC threads (an earlier serving test in the same worker) runs gRPC's
    fork handlers before exec, which now and then aborted it with "epoll_wait error: Bad file
    descriptor" (exit -6, 2 CI runs of 5); without `preexec_fn` the child is spawned without
    them.

    Example:
        >>> subprocess.run(set_up_then_exec("import resource; resource.setrlimit("
        ...                                 "resource.RLIMIT_FSIZE, (200, 200))", command))
    """
    return [sys.executable, "-c", f"import os, sys\n{setup}\nos.execv(sys.argv[1], sys.argv[1:])",
            *command]


def tool_env(env=None):
    """The environment of a tool's process: this checkout's bert_tf first on the path (whatever
    is installed), TensorFlow's C++ INFO/WARNING lines off, then `env`."""
    path = os.pathsep.join(filter(None, [REPO_ROOT, os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path, "TF_CPP_MIN_LOG_LEVEL": "2", **(env or {})}


def run_tool(tool, *flags, env=None, timeout=900):
    """Runs `tools/<tool>` in a fresh process; returns the CompletedProcess (text output)."""
    return subprocess.run(tool_command(tool, *flags), capture_output=True, text=True,
                          timeout=timeout, env=tool_env(env))


def run_printed_export(stdout, model_base_path):
    """Runs the export command a fine-tuning tool printed last ("To serve it: ..."), as a user
    pastes it, with `model_base_path` for its --output_dir; the `CompletedProcess`."""
    line = stdout.strip().splitlines()[-1]
    prefix = "To serve it: bert-tf-export-savedmodel "
    assert line.startswith(prefix), line
    return run_tool("export_savedmodel.py", *line.removeprefix(prefix).replace(
        "<model base path>", str(model_base_path)).split())


def error_output(result):
    """The failed tool's stderr, which must be its one error line (exit status 1)."""
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]

def latest_step(directory):
    """The step of the newest checkpoint in `directory`, or None."""
    latest = tf.train.latest_checkpoint(str(directory))
    return int(latest.rsplit("-", 1)[1]) if latest else None


def eval_results(output_dir):
    """The `eval_results.json` a job wrote to `output_dir`."""
    with open(os.path.join(output_dir, "eval_results.json"), encoding="utf-8") as f:
        return json.load(f)


def scalar_curves(directory):
    """`{tag: [(step, value), ...]}` of the TensorBoard scalars in `directory`, in writing
    order (a resumed job's repeated steps appear twice)."""
    return {tag: [(event.step, event.value) for event in events]
            for tag, events in read_scalars(str(directory)).items()}


def kill_at_first_checkpoint(tool, flags, output_dir, timeout=600):
    """Starts `tools/<tool>`, SIGKILLs it as soon as `output_dir` holds a checkpoint and returns
    that checkpoint's step (the test fails if the job ends first or writes none in time)."""
    job = subprocess.Popen(tool_command(tool, *flags), stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, env=tool_env())
    try:
        deadline = time.monotonic() + timeout
        while latest_step(output_dir) is None and job.poll() is None:
            assert time.monotonic() < deadline, f"no checkpoint within {timeout} s"
            time.sleep(0.02)
        job.send_signal(signal.SIGKILL)
        assert job.wait(timeout=60) == -signal.SIGKILL, "the job ended before it could be killed"
    finally:
        if job.poll() is None:
            job.kill()
    return latest_step(output_dir)
