"""Pre-training's held-out evaluation: masked-LM and next-sentence metrics of the trainer's
current weights on held-out TFRecords, written as every job writes results
(`eval_results.json`, TensorBoard `eval/`).

Example:
    >>> evaluation = HeldOutEvaluation(trainer, ["heldout.tfrecord"], 128, 20, batch_size=32,
    ...                                output_dir="/tmp/pretrain")
    >>> evaluation()            # after training, or after every checkpoint
    >>> evaluation.step, evaluation.metrics["masked_lm_accuracy"]
"""

import logging
import math

from bert_tf.data.pretraining.records_dataset import (count_records, evaluation_dataset,
                                                      naming_bad_input_files)
from bert_tf.training.eval_results import write_eval_results

logger = logging.getLogger("bert_tf.training")


class HeldOutEvaluation:
    """Evaluates a `PretrainingTrainer` on held-out records each time it is called.

    Args:
        trainer: the `PretrainingTrainer`.
        files: the held-out TFRecord files.
        seq_length, predictions: the records' max_seq_length and max_predictions_per_seq.
        batch_size: records per evaluation step, over all replicas.
        output_dir: where results are written (only if `chief`).
        max_steps: evaluate at most this many batches (default: every record).
        chief: whether this worker writes the results.

    After a call, `step` is the global step evaluated and `metrics` the result.
    """

    def __init__(self, trainer, files, seq_length, predictions, batch_size, output_dir,
                 max_steps=None, chief=True):
        self.trainer, self.files, self.chief = trainer, files, chief
        self.seq_length, self.predictions = seq_length, predictions
        self.batch_size, self.output_dir = batch_size, output_dir
        self.num_records = count_records(files, max_steps * batch_size if max_steps else None)
        self.steps = math.ceil(self.num_records / batch_size)
        self.step, self.metrics = None, None

    def __call__(self):
        vocab_size = self.trainer.model.encoder.config.vocab_size
        with naming_bad_input_files(self.files, self.seq_length, self.predictions, vocab_size):
            self.metrics = self.trainer.evaluate(
                lambda context: evaluation_dataset(self.files, self.batch_size, self.seq_length,
                                                   self.predictions, self.num_records, context,
                                                   vocab_size),
                self.steps)
        self.step = int(self.trainer.global_step.numpy())
        logger.info("Evaluation at step %d on %d records: %s", self.step, self.num_records,
                    self.metrics)
        if self.chief:
            write_eval_results(self.output_dir, self.metrics, self.step)
        return self.metrics
