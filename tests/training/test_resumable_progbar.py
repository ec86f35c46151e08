"""`ResumableProgbar`: the time per step and the ETA of a resumed run, on a fake clock."""

import re

import pytest
from keras.src.utils import progbar as keras_progbar

from bert_tf.training.resumable_progbar import ResumableProgbar


class FakeClock:
    """Stands for the `time` module of Keras' progress bar: `now` is set by the test."""

    def __init__(self):
        self.now = 1000.0  # Keras redraws only 0.05 s after its last redraw, "at 0"

    def time(self):
        return self.now


@pytest.fixture
def clock(monkeypatch):
    fake = FakeClock()
    monkeypatch.setattr(keras_progbar, "time", fake)
    return fake


def shown(capsys):
    """(step, target, ETA or elapsed text, seconds per step) of the last line drawn."""
    line = [line for line in re.split(r"[\r\n]", capsys.readouterr().out) if line][-1]
    line = re.sub(r"\x1b\[[0-9;]*m", "", line)
    step, target, time_text, per_step, unit = re.match(
        r"\s*(\d+)/(\d+) \S+ (\S+) (\d+)(s|ms)/step", line).groups()
    return int(step), int(target), time_text, int(per_step) / (1000 if unit == "ms" else 1)


def test_a_resumed_run_times_its_own_steps_after_the_first(clock, capsys):
    progbar = ResumableProgbar(200, initial_step=100)
    progbar.update(100)
    assert shown(capsys) == (100, 200, "0s", 0)
    # The first call of the step (tracing and compilation included): 10 steps in 30 s.
    clock.now += 30
    progbar.update(110)
    assert shown(capsys) == (110, 200, "4:30", 3.0)  # 90 steps left at 3 s
    # Then 10 steps in 1 s: 100 ms/step, 80 steps left. Keras' own bar divided the 31 s by
    # all 120 steps, resumed ones included: 258 ms/step and an ETA of 20 s.
    clock.now += 1
    progbar.update(120)
    assert shown(capsys) == (120, 200, "8s", 0.1)
    clock.now += 8
    progbar.update(200)
    assert shown(capsys) == (200, 200, "39s", 0.1)  # the end: elapsed time of this run


def test_a_fresh_run_leaves_out_its_first_call_of_several_steps(clock, capsys):
    progbar = ResumableProgbar(100)
    progbar.update(0)
    clock.now += 20
    progbar.update(10)  # compiles: 20 s for 10 steps
    assert shown(capsys)[3] == 2.0
    clock.now += 2
    progbar.update(20)
    assert shown(capsys) == (20, 100, "16s", 0.2)
