"""`FineTuner`: trains a task model the way the paper fine-tunes BERT, resumably.

The recipe of Google's `run_classifier.py` / `run_squad.py`: AdamW (weight decay 0.01, none on
LayerNorm and biases), linear warmup over `warmup_proportion` of the steps then linear decay to
0, global-norm clipping at 1.0. Around it, what a long CPU or GPU job needs:

* Checkpoints every `steps_per_checkpoint` steps in `output_dir`, in the layout of
  `bert_tf.checkpoints.layout`: the encoder for every `--init_checkpoint` reader, the task
  model (encoder + head) for `export_savedmodel.py`, the optimizer and dropout states.
* Rerunning the same command after a crash or `kill -9` restores the latest checkpoint and
  continues at its exact step (`dataset_fn(start_step)` must skip that many batches of the same
  deterministic stream, e.g. a seeded shuffle).
* A Keras progress bar; TensorBoard scalars (loss, metrics, learning rate) in `output_dir/train`.
* `predict` over dynamically padded batches, per-token outputs padded back to `max_seq_length`.

`fit` runs one Keras "epoch" of all the steps left, checkpointing every `steps_per_checkpoint`
steps inside it, so the progress bar counts the real steps and its ETA is for the whole run.

Example:
    >>> tuner = FineTuner(classifier, "/tmp/sst2", loss=losses, num_train_steps=2000,
    ...                   learning_rate=2e-5)
    >>> tuner.train(lambda start_step: train_batches.skip(start_step))
    >>> logits = tuner.predict(eval_batches, max_seq_length=128)["logits"]
"""

import logging

import keras
import numpy as np
import tensorflow as tf

from bert_tf.checkpoints import check_task_model_fits, checkpoint_manager, training_checkpoint
from bert_tf.data.without_autotuning import without_autotuning
from bert_tf.models.batch_halves import in_batch_halves
from bert_tf.thread_pools import ops_side_by_side_on_cores
from bert_tf.training.distribution import single_process
from bert_tf.training.optimizers import create_optimizer
from bert_tf.training.schedule import WarmupPolynomialDecay
from bert_tf.training.summaries import ScalarSummaries, optimizer_step, passed_a_multiple
from bert_tf.training.resumable_progbar import ResumableProgbar
from bert_tf.training.termination import TrainingTerminated, recording_stop_signals

logger = logging.getLogger("bert_tf.training")


def fine_tuning_optimizer(model, learning_rate, num_train_steps, warmup_proportion=0.1,
                          weight_decay_rate=0.01, clip_norm=1.0):
    """BERT's fine-tuning AdamW for `model` (the pre-training one, for `Model.fit`), built: its
    slots exist, so a checkpoint can restore them before the first step."""
    schedule = WarmupPolynomialDecay(learning_rate, num_train_steps,
                                     int(warmup_proportion * num_train_steps))
    return create_optimizer("adamw", schedule, model.trainable_variables, weight_decay_rate,
                            clip_norm, summed_by_train_step=False)


class _SaveEverySteps(keras.callbacks.Callback):
    """Saves a checkpoint every `steps` optimizer steps, and at the end of training. With
    several steps per host call (`steps_per_execution`), at the end of the call that passes a
    multiple of `steps`.

    When `terminated` (a `termination.recording_stop_signals` record) is true at the end of a host
    call, saves at that step and stops training (`stopped_at`: the step and checkpoint)."""

    def __init__(self, manager, steps, terminated=None):
        super().__init__()
        self.manager = manager
        self.steps = steps
        self.terminated = terminated
        self.stopped_at = None
        self._saved_step = None

    def _save(self, step):
        self.manager.save(checkpoint_number=step)
        self._saved_step = step

    def on_train_begin(self, logs=None):
        self._saved_step = optimizer_step(self.model)  # restored from its checkpoint, or 0

    def on_train_batch_end(self, batch, logs=None):
        step = optimizer_step(self.model)
        if passed_a_multiple(self._saved_step, step, self.steps):
            self._save(step)
        if self.terminated and not self.model.stop_training:
            if step != self._saved_step:
                self._save(step)
            self.stopped_at = step, self.manager.latest_checkpoint
            self.model.stop_training = True

    def on_train_end(self, logs=None):
        step = optimizer_step(self.model)
        if step != self._saved_step:
            self._save(step)


class _RealStepsProgbar(keras.callbacks.ProgbarLogger):
    """Keras' progress bar over the job's optimizer steps, as many as each host call really ran.

    Keras' own `batch` counts `steps_per_execution` steps per call, the last call's too, which
    runs only the steps left (a 2,105-step SST-2 epoch at 10 per call showed 2110/2105 before
    2105/2105, a 6-step job 10/6), and Keras 3.10 passes the index of a call's first step, not
    its last (3 steps per call counted 1, 4, 7 for 3, 6, 9). A resumed job's bar starts at its
    checkpoint's step (70/200, not 0/130; `ResumableProgbar`: the ETA from this run's steps),
    and a job stopped early (SIGTERM) ends its bar where it stopped, not at the total.
    """

    def __init__(self, num_train_steps):
        super().__init__()
        self.num_train_steps = num_train_steps
        self._first_step = 0

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)
        self._first_step = optimizer_step(self.model)  # restored from its checkpoint, or 0

    def _maybe_init_progbar(self):
        if self.progbar is None:
            # `stateful_metrics` (Keras 3.10 has no `stateless_metrics`): filled with the names
            # fit reports, which are running means already, shown as they are.
            self.progbar = ResumableProgbar(self.num_train_steps, self._first_step,
                                            verbose=self.verbose, unit_name="step",
                                            stateful_metrics=set())

    def on_train_batch_end(self, batch, logs=None):
        self._maybe_init_progbar()
        self.progbar.stateful_metrics.update(logs or {})
        # ProgbarLogger shows `batch + 1` steps done.
        super().on_train_batch_end(optimizer_step(self.model) - 1, logs)

    def _finalize_progbar(self, logs):
        self.progbar.update(self.seen, list((logs or {}).items()), finalize=True)


class FineTuner:
    """Compiles `model` with BERT's optimizer and trains it with checkpoints and resume.

    Args:
        model: a task model (`BertClassifier`, `BertSpanLabeler`, ...) whose `encoder` holds
            the initial weights.
        output_dir: checkpoints and TensorBoard logs; resumed from when it holds a checkpoint.
        loss, metrics, loss_weights: as for `keras.Model.compile`, keyed by the model's output
            names (e.g. `{"logits": ...}`).
        learning_rate, num_train_steps, warmup_proportion, weight_decay_rate, clip_norm:
            see `fine_tuning_optimizer`.
        steps_per_checkpoint: optimizer steps between checkpoints.
        keep_checkpoint_max: checkpoints kept.
        jit_compile: compile the train step with XLA (one compilation per padded length).
        steps_per_execution: train steps per host call (checkpoints and logs then fall due at
            the end of the call that passes their multiple).

    Trains in one process, on its devices (the default strategy, `MirroredStrategy`,
    `TPUStrategy`): a `MultiWorkerMirroredStrategy` over several workers is a ValueError.
    Keras 3's `fit` cannot run one (keras-team/keras#20585: its first step fails on a dict of
    features, keras-team/keras#20329, then on the loss's reduction,
    tensorflow/tensorflow#72388), and one output directory would take every worker's
    checkpoints. Pre-training (`PretrainingTrainer`) runs multi-worker.
    """

    def __init__(self, model, output_dir, *, loss, num_train_steps, learning_rate,
                 metrics=None, loss_weights=None, warmup_proportion=0.1, weight_decay_rate=0.01,
                 clip_norm=1.0, steps_per_checkpoint=500, keep_checkpoint_max=2,
                 jit_compile=False, steps_per_execution=1):
        if num_train_steps < 1:
            raise ValueError(f"num_train_steps must be positive, got {num_train_steps}")
        if steps_per_checkpoint < 1:
            raise ValueError(f"steps_per_checkpoint must be positive, got {steps_per_checkpoint}")
        strategy = getattr(model, "distribute_strategy", None) or tf.distribute.get_strategy()
        if not single_process(strategy):
            raise ValueError("fine-tuning runs in one process: a MultiWorkerMirroredStrategy "
                             "over several workers is not supported (Keras 3's fit cannot run "
                             "it, keras-team/keras#20585); use one worker's devices")
        self.model = model
        self.output_dir = output_dir
        self.num_train_steps = num_train_steps
        self.steps_per_checkpoint = steps_per_checkpoint
        self.optimizer = fine_tuning_optimizer(model, learning_rate, num_train_steps,
                                               warmup_proportion, weight_decay_rate, clip_norm)
        model.compile(optimizer=self.optimizer, loss=loss, metrics=metrics,
                      loss_weights=loss_weights, jit_compile=jit_compile,
                      steps_per_execution=steps_per_execution)
        # Dropout's random-number states too, so that a resumed run draws the same masks as
        # one that never stopped.
        dropout_seeds = [v for v in model.non_trainable_variables if "seed_generator" in v.path]
        checkpoint = training_checkpoint(model.encoder, task_model=model,
                                         optimizer=self.optimizer, dropout_rng=dropout_seeds)
        self.manager = checkpoint_manager(checkpoint, output_dir, keep_checkpoint_max)

    @property
    def step(self):
        """Optimizer steps taken so far (restored ones included)."""
        return optimizer_step(self.model)

    def restore_latest(self):
        """Restores the latest checkpoint in `output_dir`, if any; returns its path or None.
        A checkpoint of another task model is a ValueError naming what differs."""
        latest = self.manager.latest_checkpoint
        if latest:
            # The checkpoints' own check of a task model (the class it records, every weight
            # and shape; no weight read) before the restore: tf.train.Checkpoint named one
            # variable's shapes, not the run it came from, or restored another task model's
            # head of the same shapes. A checkpoint older than that class record still passes
            # such a head: only run.json, checked before (existing_run), tells the task of a
            # newer run.
            try:
                check_task_model_fits(self.model, latest)
            except ValueError as error:
                raise ValueError(f"{self.output_dir} holds a run this {type(self.model).__name__} "
                                 f"cannot resume: {error} Use a new --output_dir.") from error
            self.manager.checkpoint.restore(latest).assert_existing_objects_matched()
            logger.info("Resumed from %s at step %d", latest, self.step)
        return latest

    def train(self, dataset_fn, verbose="auto"):
        """Trains up to `num_train_steps`, resuming from `output_dir`'s latest checkpoint.

        `dataset_fn(start_step)` returns the (repeated) training batches from batch
        `start_step` on. Returns the Keras `History` (None when nothing was left to do).
        """
        self.restore_latest()
        start_step = self.step
        if start_step >= self.num_train_steps:
            logger.info("%s is already trained (%d steps)", self.output_dir, start_step)
            return None
        # SIGTERM (preemption) or SIGINT (Ctrl-C) saves at the end of the host call and raises
        # TrainingTerminated instead of returning.
        with recording_stop_signals() as terminated:
            saving = _SaveEverySteps(self.manager, self.steps_per_checkpoint, terminated)
            callbacks = [saving, ScalarSummaries(self.output_dir),
                         _RealStepsProgbar(self.num_train_steps)]
            # One pass of the steps left (the progress bar counts the job's steps: resumed at
            # step 7 of 12, from 7 to 12).
            # The batches end there too: with several steps per host call, Keras' last call
            # stops at the end of the data, not at the next multiple of `steps_per_execution`.
            steps = self.num_train_steps - start_step
            history = self.model.fit(
                without_autotuning(dataset_fn(start_step).take(steps)), epochs=1,
                steps_per_epoch=steps, callbacks=callbacks,
                shuffle=False,  # the dataset is shuffled (and resumable) already
                verbose=verbose)
        if saving.stopped_at and saving.stopped_at[0] < self.num_train_steps:
            raise TrainingTerminated(terminated.signum, *saving.stopped_at)
        return history

    def predict(self, dataset, max_seq_length, sequence_outputs=(), verbose=1):
        """See `predict_padded`."""
        return predict_padded(self.model, dataset, max_seq_length, sequence_outputs, verbose)


def predict_padded(model, dataset, max_seq_length, sequence_outputs=(), verbose=1):
    """`model`'s outputs (a dict) over every batch of `dataset` (features, or tuples starting
    with features), concatenated as NumPy arrays.

    Batches may be dynamically padded (`padded_batches`): the outputs named in
    `sequence_outputs` have their axis 1 (the sequence axis, e.g. a token classifier's
    `[batch, seq, classes]` logits or a span labeler's `[batch, seq]` start logits) padded with
    zeros back to `max_seq_length`, so that batches of different lengths concatenate.

    Example:
        >>> predict_padded(tagger, padded_batches(examples, 64, 128), 128, ("logits",))
    """
    steps = int(dataset.cardinality())
    progbar = keras.utils.Progbar(steps if steps >= 0 else None, verbose=verbose,
                                  unit_name="batch")

    # Traced once, for any batch and sequence length: padded batches come in up to
    # max_seq_length / multiple shapes, and each trace of a task model costs seconds.
    features_spec = dataset.element_spec
    features_spec = features_spec if isinstance(features_spec, dict) else features_spec[0]

    @tf.function(input_signature=[{name: tf.TensorSpec([None] * spec.shape.rank, spec.dtype)
                                   for name, spec in features_spec.items()}], autograph=False)
    def predict_step(features):
        if ops_side_by_side_on_cores():  # one pass per core (see `in_batch_halves`)
            # Both halves call one traced function, so the model is traced once, not twice:
            # MiniLM's classifier 1.83 / 2.13 -> 1.02 / 1.50 s, the batches as fast (64 x 16,
            # 32, 64 tokens; 2-vCPU Intel Xeon with AMX).
            return in_batch_halves(tf.function(forward, autograph=False), features)
        return forward(features)

    def forward(features):
        return model(features, training=False)

    batches = []
    for element in without_autotuning(dataset):
        features = element if isinstance(element, dict) else element[0]
        outputs = {name: np.asarray(value) for name, value in predict_step(features).items()}
        for name in sequence_outputs:
            value = outputs[name]
            widths = [(0, 0)] * value.ndim
            widths[1] = (0, max_seq_length - value.shape[1])
            outputs[name] = np.pad(value, widths)
        batches.append(outputs)
        progbar.add(1)
    if not batches:
        raise ValueError("predict: the dataset has no batches")
    return {name: np.concatenate([batch[name] for batch in batches]) for name in batches[0]}
