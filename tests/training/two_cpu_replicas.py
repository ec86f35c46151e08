"""Trains the same global batches on one device and on a MirroredStrategy over two logical CPU
devices, from the same weights, and saves both end states for `test_distributed.py`.

It runs in a fresh process: TensorFlow splits the CPU into logical devices only before it
initialises, which a pytest process that already ran TensorFlow cannot undo.

    python tests/training/two_cpu_replicas.py RECORDS.tfrecord OUT.npz
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)

import keras  # noqa: E402

from bert_tf.data.pretraining.records_dataset import training_dataset  # noqa: E402
from bert_tf.training.distribution import create_strategy  # noqa: E402
from bert_tf.training.pretraining_trainer import PretrainingTrainer  # noqa: E402
from tests.training.test_pretraining_trainer import (BATCH, CONFIG, PREDICTIONS,  # noqa: E402
                                                     SEQ)

STEPS = 3
CLIP_NORM = 0.05  # far below the gradient's norm: every step is clipped


def train(strategy, files, initial_weights, jit_compile):
    keras.utils.set_random_seed(0)
    trainer = PretrainingTrainer(strategy, CONFIG, global_batch_size=BATCH, num_train_steps=10,
                                 num_warmup_steps=1, learning_rate=1e-2, clip_norm=CLIP_NORM,
                                 jit_compile=jit_compile)
    if initial_weights is not None:
        trainer.model.set_weights(initial_weights)
    initial = trainer.model.get_weights()
    dataset = strategy.distribute_datasets_from_function(
        lambda context: training_dataset(files, BATCH, SEQ, PREDICTIONS, context, seed=7))
    iterator = iter(dataset)
    features = next(iter(training_dataset(files, BATCH, SEQ, PREDICTIONS, seed=7)))
    norm = None
    if strategy.num_replicas_in_sync == 1:
        gradients, _ = trainer._gradients(features, tf.reduce_sum(features["masked_lm_weights"]),
                                          tf.constant(float(BATCH)))
        norm = float(tf.linalg.global_norm(gradients))
    totals = trainer.train_steps(iterator, tf.constant(STEPS)).numpy()
    state = [np.asarray(v) for v in trainer.model.weights + trainer.optimizer.variables]
    return initial, totals, state, norm, strategy.num_replicas_in_sync


def main(records, output):
    files = [records]
    initial, one_totals, one_state, norm, _ = train(
        tf.distribute.OneDeviceStrategy("/cpu:0"), files, None, jit_compile=False)
    _, mirrored_totals, mirrored_state, _, replicas = train(
        create_strategy("mirrored"), files, initial, jit_compile=True)
    np.savez(output, one_device_totals=one_totals, mirrored_totals=mirrored_totals,
             gradient_norm=norm, replicas=replicas, clip_norm=CLIP_NORM,
             **{f"one_device_{i}": v for i, v in enumerate(one_state)},
             **{f"mirrored_{i}": v for i, v in enumerate(mirrored_state)})


if __name__ == "__main__":
    main(*sys.argv[1:])
