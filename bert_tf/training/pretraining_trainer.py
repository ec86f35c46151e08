"""`PretrainingTrainer`: BERT pre-training under any `tf.distribute` strategy."""

import logging
import os
import time

import tensorflow as tf

from bert_tf.checkpoints import (checkpoint_manager, pretraining_head_weights, restore_weights,
                                 training_checkpoint)
from bert_tf.models.bert_encoder import BertEncoder
from bert_tf.models.bert_pretrainer import BertPretrainer
from bert_tf.training import distribution
from bert_tf.training.mixed_precision import MIXED_PRECISION, warn_if_float16_on_cpu
from bert_tf.training.optimizers import create_optimizer
from bert_tf.training.pretraining_objective import (STATISTICS, pretraining_loss,
                                                    pretraining_metrics, pretraining_statistics)
from bert_tf.training.resumable_progbar import ResumableProgbar
from bert_tf.training.schedule import WarmupPolynomialDecay
from bert_tf.training.summaries import write_scalars
from bert_tf.training.termination import (AnyWorkerTerminated, TrainingTerminated,
                                          recording_stop_signals)
from bert_tf.xla_host import host_jit_compile

logger = logging.getLogger("bert_tf.training")

# The progress bar's columns, in this order: Keras keeps a bar's `stateful_metrics` in a set,
# whose order (the hash seed's) changed from one run to the next.
_PROGRESS_METRICS = ("loss", "masked_lm_accuracy", "next_sentence_accuracy")


class PretrainingTrainer:
    """Trains a `BertPretrainer` with a custom, distributed, optionally XLA-compiled step.

    One *step* is one optimizer update on `global_batch_size` examples:

    1. every replica takes its `global_batch_size / replicas` examples and splits them into
       `gradient_accumulation_steps` micro-batches (less activation memory, same update);
    2. the replicas first sum their real masked-LM predictions and examples: each micro-batch
       loss is divided by those *global* counts (`pretraining_objective`), so the summed
       gradient is exactly that of Google's loss on the whole global batch, whatever the
       number of replicas or micro-batches;
    3. the forward and backward passes of all micro-batches run as one function compiled with
       XLA when `jit_compile` (the default);
    4. gradients are summed across replicas once, then the optimizer clips their global norm
       and applies the update (loss scaling for float16).

    Steps 2 and 4 synchronise replicas, which a MirroredStrategy cannot do inside a compiled
    function, so on CPU/GPU XLA compiles step 3; a TPU compiles the whole replica step
    (`replica_train_step`) anyway. `train_steps` runs several steps per call
    (`steps_per_execution`) to amortise the host round trip.

    The checkpoint holds the encoder (under `encoder`, the package's checkpoint convention),
    the heads (under `pretraining_heads`, by Google name), the optimizer with its slots and
    iteration count, the global step and the dropout RNG states: a restarted job continues
    exactly where the checkpoint was written (the input stream is re-positioned from the step,
    see `bert_tf.data.pretraining.records_dataset.training_dataset`).

    Example:
        >>> trainer = PretrainingTrainer(tf.distribute.MirroredStrategy(), config,
        ...                              global_batch_size=256, num_train_steps=1000,
        ...                              num_warmup_steps=100, learning_rate=1e-4)
        >>> trainer.train(lambda ctx, start_step: training_dataset(files, 256, 128, 20, ctx,
        ...                                                        start_step=start_step),
        ...               output_dir="/tmp/pretraining", save_checkpoints_steps=500)
    """

    def __init__(self, strategy, config, *, global_batch_size, num_train_steps,
                 num_warmup_steps=0, learning_rate=1e-4, optimizer="adamw",
                 weight_decay_rate=0.01, clip_norm=1.0, mixed_precision="float32",
                 jit_compile=True, gradient_accumulation_steps=1):
        if mixed_precision not in MIXED_PRECISION:
            raise ValueError(f"mixed_precision must be one of {sorted(MIXED_PRECISION)}, got "
                             f"{mixed_precision!r}")
        replicas = strategy.num_replicas_in_sync
        if gradient_accumulation_steps < 1 or global_batch_size % (
                replicas * gradient_accumulation_steps):
            raise ValueError(
                f"The batch size {global_batch_size} must split evenly over {replicas} "
                f"replica(s) x {gradient_accumulation_steps} accumulation step(s)")
        warn_if_float16_on_cpu(mixed_precision, strategy)
        self.strategy = strategy
        self.global_batch_size = global_batch_size
        self.num_train_steps = num_train_steps
        self.gradient_accumulation_steps = gradient_accumulation_steps
        self.learning_rate = WarmupPolynomialDecay(learning_rate, num_train_steps,
                                                   num_warmup_steps)
        with strategy.scope():
            encoder = BertEncoder(config, dtype=MIXED_PRECISION[mixed_precision])
            self.model = BertPretrainer(encoder)
            self.optimizer = create_optimizer(
                optimizer, self.learning_rate, self.model.trainable_variables,
                weight_decay_rate=weight_decay_rate, clip_norm=clip_norm,
                loss_scaling=mixed_precision == "float16")
            self.global_step = tf.Variable(0, dtype=tf.int64, trainable=False,
                                           name="global_step")
        self.checkpoint = training_checkpoint(
            encoder, heads=dict(pretraining_head_weights(self.model)), optimizer=self.optimizer,
            step=self.global_step,
            # Keras keeps each dropout layer's RNG state in a variable no layer tracks.
            dropout_rng=list(self.model.non_trainable_variables))
        # Not jit_compile=False: that would also keep the parts XLA compiles on their own
        # (`pretraining_objective`'s loss) from being compiled. None under tensorflow-tpu on
        # the host too (`host_jit_compile`), where no XLA backend for the CPU exists.
        jit_compile = host_jit_compile() if jit_compile else None
        self._gradients = tf.function(self._accumulated_gradients, jit_compile=jit_compile)
        self._evaluation_statistics = tf.function(self._batch_statistics,
                                                  jit_compile=jit_compile)

    # ---- The replicated computation -------------------------------------------------------

    def _micro_batch_gradients(self, features, total_masked_lm_weight, total_examples):
        with tf.GradientTape() as tape:
            outputs = self.model(features, training=True)
            statistics = pretraining_statistics(outputs, features)
            loss = pretraining_loss(statistics, total_masked_lm_weight, total_examples)
            scaled_loss = self.optimizer.scale_loss(loss)  # identity unless float16
        gradients = tape.gradient(scaled_loss, self.model.trainable_variables)
        return gradients, tf.stack([statistics[name] for name in STATISTICS])

    def _accumulated_gradients(self, features, total_masked_lm_weight, total_examples):
        steps = self.gradient_accumulation_steps
        if steps == 1:
            return self._micro_batch_gradients(features, total_masked_lm_weight, total_examples)
        micro_batches = {key: tf.reshape(value, [steps, -1, *value.shape[1:]])
                         for key, value in features.items()}

        def accumulate(i, gradients, statistics):
            micro = {key: value[i] for key, value in micro_batches.items()}
            new_gradients, new_statistics = self._micro_batch_gradients(
                micro, total_masked_lm_weight, total_examples)
            return (i + 1, [g + n for g, n in zip(gradients, new_gradients)],
                    statistics + new_statistics)

        zeros = [tf.zeros_like(v) for v in self.model.trainable_variables]
        _, gradients, statistics = tf.while_loop(
            lambda i, *_: i < steps, accumulate,
            (tf.constant(0), zeros, tf.zeros([len(STATISTICS)])))
        return gradients, statistics

    def replica_train_step(self, features):
        """One optimizer step, run on every replica by `strategy.run`; returns this replica's
        `STATISTICS` as one vector. Compiles as a whole with XLA (what a TPU does)."""
        context = tf.distribute.get_replica_context()
        counts = context.all_reduce(tf.distribute.ReduceOp.SUM, tf.stack([
            tf.reduce_sum(features["masked_lm_weights"]),
            tf.reduce_sum(tf.cast(features["input_mask"][:, 0], tf.float32))]))
        gradients, statistics = self._gradients(features, counts[0], counts[1])
        gradients = context.all_reduce(tf.distribute.ReduceOp.SUM, gradients)
        self.optimizer.apply(gradients, self.model.trainable_variables)
        return statistics

    def _batch_statistics(self, features):
        statistics = pretraining_statistics(self.model(features, training=False), features)
        return tf.stack([statistics[name] for name in STATISTICS])

    @tf.function
    def train_steps(self, iterator, num_steps):
        """Runs `num_steps` (a scalar tensor: no retracing) train steps from an `input_iterator`;
        returns the `STATISTICS` summed over replicas and steps."""
        totals = tf.zeros([len(STATISTICS)])
        for _ in tf.range(num_steps):
            statistics = self.strategy.run(self.replica_train_step, args=(next(iterator),))
            totals += self.strategy.reduce(tf.distribute.ReduceOp.SUM, statistics, axis=None)
            self.global_step.assign_add(1)
        return totals

    @tf.function
    def evaluation_steps(self, iterator, num_steps):
        """The `STATISTICS` of `num_steps` evaluation batches, summed."""
        totals = tf.zeros([len(STATISTICS)])
        for _ in tf.range(num_steps):
            statistics = self.strategy.run(self._evaluation_statistics, args=(next(iterator),))
            totals += self.strategy.reduce(tf.distribute.ReduceOp.SUM, statistics, axis=None)
        return totals

    # ---- The host loop ---------------------------------------------------------------------

    def _checkpoint_manager(self, output_dir, max_to_keep):
        directory = output_dir
        if not distribution.is_chief(self.strategy):
            # Every worker must take part in saving (variables may need collectives to read),
            # but only the chief's copy is kept.
            resolver = self.strategy.cluster_resolver
            directory = os.path.join(output_dir, f".tmp_{resolver.task_type}_{resolver.task_id}")
        return checkpoint_manager(self.checkpoint, directory, max_to_keep)

    def restore(self, path):
        """Restores everything from one of this trainer's checkpoints (a prefix)."""
        self.checkpoint.restore(path).assert_existing_objects_matched()
        logger.info("Restored %s at step %d", path, int(self.global_step.numpy()))

    def _restore_or_initialize(self, output_dir, init_checkpoint):
        latest = tf.train.latest_checkpoint(output_dir)
        if latest:
            self.restore(latest)  # resuming wins over --init_checkpoint, as in Google's tools
        elif init_checkpoint:
            self.initialize_from(init_checkpoint)

    def initialize_from(self, init_checkpoint):
        """Loads the encoder's weights (and the pre-training heads', when it has them) from
        `init_checkpoint` (any format `bert_tf.checkpoints.restore_weights` reads); ValueError
        naming what does not fit the model."""
        report = restore_weights(self.model, init_checkpoint)
        logger.info("Initialised the encoder%s from %s",
                    " and the pre-training heads" if report.heads_loaded else "",
                    init_checkpoint)

    def train(self, dataset_fn, output_dir, *, steps_per_execution=1, save_checkpoints_steps=1000,
              keep_checkpoint_max=5, init_checkpoint=None, progress=True, after_checkpoint=None):
        """Trains until `num_train_steps`, resuming from `output_dir`'s latest checkpoint.

        Args:
          dataset_fn: `(input_context, start_step) -> tf.data.Dataset` of per-replica batches
            positioned at `start_step` (e.g. `training_dataset`).
          output_dir: checkpoints (`ckpt-<step>`, the last `keep_checkpoint_max` kept) and
            TensorBoard scalars (`train/`: the four metrics, `loss`, `learning_rate`,
            `examples_per_second`, `steps_per_second`).
          steps_per_execution: steps per host call.
          save_checkpoints_steps: a checkpoint every this many steps, and at the end.
          init_checkpoint: weights to start from when `output_dir` has no checkpoint (any
            format `bert_tf.checkpoints.restore_weights` reads; the heads too when it has them).
          progress: show a progress bar (chief only).
          after_checkpoint: called with the step after each checkpoint is written (on every
            worker), e.g. to evaluate held-out data.

        Returns the metrics of the last `steps_per_execution` steps (empty when nothing ran).
        """
        chief = distribution.is_chief(self.strategy)
        manager = self._checkpoint_manager(output_dir, keep_checkpoint_max)
        self._restore_or_initialize(output_dir, init_checkpoint)
        step = int(self.global_step.numpy())
        if step >= self.num_train_steps:
            logger.info("%s is already at step %d of %d", output_dir, step, self.num_train_steps)
            return {}
        iterator = distribution.input_iterator(self.strategy,
                                               lambda context: dataset_fn(context, step))
        writer = (tf.summary.create_file_writer(os.path.join(output_dir, "train")) if chief
                  else tf.summary.create_noop_writer())
        progbar = ResumableProgbar(self.num_train_steps, initial_step=step,
                                   verbose=1 if chief and progress else 0,
                                   stateful_metrics=_PROGRESS_METRICS)
        progbar.update(step)
        metrics = {}
        # SIGTERM (preemption) or SIGINT (Ctrl-C) to any worker saves at the end of the host
        # call on every worker and raises TrainingTerminated.
        any_worker_terminated = AnyWorkerTerminated(self.strategy)
        with recording_stop_signals() as terminated:
            while step < self.num_train_steps:
                num_steps = min(steps_per_execution, self.num_train_steps - step,
                                save_checkpoints_steps - step % save_checkpoints_steps)
                started = time.perf_counter()
                totals = self.train_steps(iterator, tf.constant(num_steps)).numpy()
                seconds = time.perf_counter() - started
                step += num_steps
                metrics = pretraining_metrics(dict(zip(STATISTICS, totals)))
                write_scalars(writer, step, {
                    **metrics, "learning_rate": float(self.learning_rate(step - 1)),
                    "examples_per_second": num_steps * self.global_batch_size / seconds,
                    "steps_per_second": num_steps / seconds})
                writer.flush()  # a killed job keeps its curve up to the kill
                progbar.update(step, [(name, metrics[name]) for name in _PROGRESS_METRICS])
                stopped_by = (any_worker_terminated(terminated)
                              if step < self.num_train_steps else None)
                if (stopped_by or step % save_checkpoints_steps == 0
                        or step == self.num_train_steps):
                    saved = manager.save(checkpoint_number=step)
                    if stopped_by:  # no evaluation: the grace period before SIGKILL is short
                        self._remove_worker_copy(manager)
                        distribution.wait_for_every_worker(self.strategy, f"stop at {step}")
                        raise TrainingTerminated(stopped_by, step, os.path.join(
                            output_dir, os.path.basename(saved)),  # the chief's
                            another_worker=not terminated)
                    if after_checkpoint:
                        after_checkpoint(step)
        writer.flush()
        self._remove_worker_copy(manager)
        distribution.wait_for_every_worker(self.strategy, f"end at {step}")
        return metrics

    def _remove_worker_copy(self, manager):
        """Removes a worker's own copy of the checkpoints (`_checkpoint_manager`); the chief's
        are the run's."""
        if not distribution.is_chief(self.strategy):
            if tf.io.gfile.exists(manager.directory):  # local or gs://
                tf.io.gfile.rmtree(manager.directory)

    def evaluate(self, dataset_fn, num_steps):
        """The metrics (`pretraining_objective.METRICS` and `examples`) over `num_steps` batches
        of `dataset_fn(input_context)`, with the current weights."""
        iterator = distribution.input_iterator(self.strategy, dataset_fn)
        totals = dict(zip(STATISTICS, self.evaluation_steps(iterator,
                                                            tf.constant(num_steps)).numpy()))
        return {**pretraining_metrics(totals), "examples": int(totals["examples"])}
