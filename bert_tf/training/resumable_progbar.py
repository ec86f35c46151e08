"""`ResumableProgbar`: a Keras progress bar over a job's global steps that a run may join
midway (a resumed job), with a time per step and an ETA measured on this run's steps only.

Keras' `Progbar` divides the time since it was created by the step it is at (or, from step 2
on, by the steps after step 1): a job resumed at step 9,000 of 10,000 that has done 10 steps in
20 s showed 2 ms/step and an ETA of 2 s instead of 2 s/step and 33 minutes. Here the time per
step counts only the steps this run did since its first update, whose time (the first call
traces and compiles the step) would otherwise weigh on every estimate; until that second
update, the first one's time is all there is.

Example:
    >>> progbar = ResumableProgbar(10_000, initial_step=9_000)
    >>> progbar.update(9_000)          # the bar starts at the checkpoint's step
    >>> progbar.update(9_010, [("loss", 2.5)])
"""

import keras


class ResumableProgbar(keras.utils.Progbar):
    """A `keras.utils.Progbar` to `target` whose run starts at `initial_step` (see the module
    docstring); the other arguments are Progbar's."""

    def __init__(self, target, initial_step=0, **kwargs):
        super().__init__(target, **kwargs)
        self.initial_step = initial_step
        self._first_update = None  # (step, time) of this run's first step counted

    def _estimate_step_duration(self, current, now):
        # Keras calls this on every update with the step reached and the time.
        if current <= self.initial_step:
            return 0
        if self._first_update is None:
            self._first_update = (current, now)
        first_step, first_time = self._first_update
        if current == first_step:
            return (now - self._start) / (current - self.initial_step)
        return (now - first_time) / (current - first_step)
