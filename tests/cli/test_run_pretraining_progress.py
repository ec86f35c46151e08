"""run_pretraining as a user watches it, in fresh processes: the warmup is 10 % of the steps
unless --num_warmup_steps says otherwise, a resumed job's progress bar counts to the real
total from the checkpoint's step, TensorBoard gets examples per second, stderr holds only
the tool's own lines, and a job resumed with another learning rate or warmup says so."""

import json
import math
import re

import numpy as np
import pytest

from tests.cli.user_runs import run_as_user
from tests.data.pretraining.records import write_pretraining_records
from tests.tools.test_run_pretraining import CONFIG
from tests.tools.tool_runs import scalar_curves
from tests.training.test_schedule import googles_learning_rate

BATCH = 8


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    directory = tmp_path_factory.mktemp("job")
    write_pretraining_records(directory / "train.tfrecord", 40, 16, 3, vocab_size=40, seed=1)
    config = directory / "bert_config.json"
    config.write_text(json.dumps(CONFIG))
    return [f"--bert_config_file={config}", f"--input_file={directory / 'train.tfrecord'}",
            f"--output_dir={directory / 'output'}", f"--train_batch_size={BATCH}",
            "--learning_rate=1e-3", "--save_checkpoints_steps=10", "--strategy=cpu",
            "--nojit_compile"], directory / "output"


@pytest.fixture(scope="module")
def first_run(job):
    """20 steps, no --num_warmup_steps (the default: 2, 10 % of 20; 10,000 rejected this job)."""
    flags, _ = job
    result = run_as_user("run_pretraining.py", *flags, "--num_train_steps=20",
                         "--steps_per_execution=1")
    assert result.returncode == 0, result.stderr[-3000:]
    return result


@pytest.fixture(scope="module")
def resumed_run(job, first_run):
    """The same job extended to 30 steps: it resumes at step 20."""
    flags, _ = job
    result = run_as_user("run_pretraining.py", *flags, "--num_train_steps=30",
                         "--steps_per_execution=5")
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def test_the_warmup_defaults_to_a_tenth_of_the_steps(job, first_run):
    _, output_dir = job
    rates = scalar_curves(output_dir / "train")["learning_rate"][:20]
    # The rate written at step s is the one step s ran with, the schedule's at s - 1.
    np.testing.assert_allclose([rate for _, rate in rates], [
        googles_learning_rate(step - 1, 1e-3, 20, 2) for step in range(1, 21)], rtol=1e-6)


def progress_lines(stdout):
    """(step, total, rest of the line) of each progress bar line, colours removed."""
    text = re.sub(r"\x1b\[[0-9;]*m|\x08", "", stdout)
    return [(int(match[1]), int(match[2]), match[3].strip()) for match in
            re.finditer(r"^\s*(\d+)/(\d+) \S+ (.*)$", text.replace("\r", "\n"), re.MULTILINE)]


def test_a_resumed_job_counts_from_its_checkpoint_to_the_real_total(resumed_run):
    lines = progress_lines(resumed_run.stdout)
    assert [(step, total) for step, total, _ in lines] == [(20, 30), (25, 30), (30, 30)]
    # The first line: nothing timed yet. Then this run's time per step and the ETA of the
    # 5 steps left are consistent; the last line gives this run's time.
    assert re.fullmatch(r"0s 0s/step", lines[0][2])
    eta, per_step, unit = re.match(r"(\d+)s (\d+)(ms|s)/step", lines[1][2]).groups()
    unit_seconds = 0.001 if unit == "ms" else 1
    # Keras shows the step rounded to a whole unit and the ETA in whole seconds: a step of 1.4 s
    # shows as "1s/step" beside an ETA of 7 s (seen with the tests on two workers).
    assert int(eta) == pytest.approx(5 * int(per_step) * unit_seconds,
                                     abs=1 + 5 * unit_seconds / 2)
    assert re.match(r"\d+s \d+m?s/step - ", lines[2][2])


def test_tensorboard_gets_examples_per_second(job, resumed_run):
    _, output_dir = job
    curves = scalar_curves(output_dir / "train")
    rates = curves["examples_per_second"]
    assert [step for step, _ in rates] == [*range(1, 21), 25, 30]
    assert all(math.isfinite(rate) and rate > 0 for _, rate in rates), rates
    steps_per_second = [rate for _, rate in curves["steps_per_second"]]
    np.testing.assert_allclose([rate for _, rate in rates],
                               np.multiply(steps_per_second, BATCH), rtol=1e-5)


@pytest.mark.parametrize("run", ["first_run", "resumed_run"])
def test_stderr_holds_only_the_tools_own_lines(job, run, request):
    _, output_dir = job
    own_lines = ["Training on 1 record file(s) on 1 replica(s) (--strategy=cpu)"]
    if run == "resumed_run":
        own_lines.append(f"Restored {output_dir}/ckpt-20 at step 20")
    # Its log lines as plain lines of its own: no absl, C++ or Python logging prefix.
    assert request.getfixturevalue(run).stderr.splitlines() == own_lines


def test_a_job_resumed_with_another_learning_rate_or_warmup_says_so_once(job, resumed_run):
    flags, output_dir = job
    lower_rate = [flag for flag in flags if not flag.startswith("--learning_rate")]
    warning = (f"run_pretraining: warning: Resuming --output_dir {output_dir} with other "
               f"settings than it trained with ({{}}): it goes on with this command's")
    # run.json then holds the new rate. Its warmup is the rule, 10 % of the steps, whatever
    # their number, until one is given.
    runs = ((31, [], [warning.format("--learning_rate 0.001 there, 0.0005 here")]),
            (32, [], []),
            (33, ["--num_warmup_steps=3"],
             [warning.format("--num_warmup_steps 10 % of the steps there, 3 here")]))
    for steps, extra_flags, warnings in runs:
        result = run_as_user("run_pretraining.py", *lower_rate, "--learning_rate=5e-4",
                             f"--num_train_steps={steps}", *extra_flags)
        assert result.returncode == 0, result.stderr[-3000:]
        assert [line for line in result.stderr.splitlines() if "warning" in line] == warnings
    rates = scalar_curves(output_dir / "train")["learning_rate"]
    assert [step for step, _ in rates][-3:] == [31, 32, 33]
    # Step s runs at the schedule's step s - 1 of that run's steps, at the new peak rate.
    np.testing.assert_allclose([rate for _, rate in rates[-3:]], [
        googles_learning_rate(step - 1, 5e-4, step, 3) for step in (31, 32, 33)], rtol=1e-6)
