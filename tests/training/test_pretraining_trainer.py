"""`PretrainingTrainer` in process, on one device. Tracing a train step costs seconds and an
XLA compilation tens of seconds of CPU, so each test builds as few trainers as it can; float16
and XLA under a distribution strategy are exercised by the multi-worker test of
tests/tools/test_run_pretraining.py."""

import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf import BertConfig
from bert_tf.checkpoints import read_weights
from bert_tf.data.pretraining.records_dataset import training_dataset
from bert_tf.training import pretraining_trainer
from bert_tf.training.pretraining_trainer import PretrainingTrainer
from bert_tf.training.resumable_progbar import ResumableProgbar
from tests.checkpoints.test_checkpoints import SMALL as GOOGLE_CONFIG
from tests.checkpoints.test_checkpoints import (google_arrays, random_encoder, random_heads,
                                                write_google_checkpoint)
from tests.data.pretraining.records import write_pretraining_records

# No dropout: runs that split the batch differently must compute the same function.
CONFIG = BertConfig(vocab_size=40, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                    intermediate_size=16, max_position_embeddings=16, hidden_dropout_prob=0.0,
                    attention_probs_dropout_prob=0.0)
SEQ, PREDICTIONS, BATCH = 16, 3, 8


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("records") / "train.tfrecord")
    write_pretraining_records(path, 64, SEQ, PREDICTIONS, vocab_size=40)
    return [path]


@pytest.fixture(scope="module")
def features(files):
    return next(iter(training_dataset(files, BATCH, SEQ, PREDICTIONS)))


def dataset_fn(files):
    return lambda context, start_step=0: training_dataset(files, BATCH, SEQ, PREDICTIONS, context,
                                                          start_step=start_step)


def make_trainer(config=CONFIG, **kwargs):
    keras.utils.set_random_seed(0)
    options = dict(global_batch_size=BATCH, num_train_steps=10, num_warmup_steps=2,
                   learning_rate=1e-2, clip_norm=0.5, jit_compile=False)
    options.update(kwargs)
    return PretrainingTrainer(tf.distribute.get_strategy(), config, **options)


def global_totals(features):
    return tf.reduce_sum(features["masked_lm_weights"]), tf.constant(float(BATCH))


@pytest.fixture(scope="module")
def reference(features):
    """A trainer without XLA or accumulation, and its gradients on `features`."""
    trainer = make_trainer()
    return trainer, trainer._gradients(features, *global_totals(features))


def test_xla_and_micro_batches_give_the_gradients_of_the_plain_step(reference, features):
    trainer, (expected_gradients, expected_statistics) = reference
    # Both change how, not what, is computed (one trainer for both: each costs a compilation).
    other = make_trainer(jit_compile=True, gradient_accumulation_steps=4)
    other.model.set_weights(trainer.model.get_weights())
    gradients, statistics = other._gradients(features, *global_totals(features))
    np.testing.assert_allclose(statistics, expected_statistics, rtol=1e-6)
    for actual, expected, variable in zip(gradients, expected_gradients,
                                          trainer.model.trainable_variables):
        np.testing.assert_allclose(tf.convert_to_tensor(actual), tf.convert_to_tensor(expected),
                                   rtol=1e-4, atol=1e-7, err_msg=variable.path)


def test_the_whole_replica_step_lowers_to_xla_at_static_shapes(reference, files, features):
    trainer, _ = reference
    dataset = dataset_fn(files)(None)
    assert all(spec.shape.is_fully_defined() for spec in dataset.element_spec.values())
    assert tf.string not in {spec.dtype for spec in dataset.element_spec.values()}
    # What a TPU compiles: forward, backward, cross-replica sums, clipping and the optimizer
    # update as one XLA computation, which cannot hold string ops or dynamic shapes.
    step = tf.function(trainer.replica_train_step, jit_compile=True)
    hlo = step.experimental_get_compiler_ir(features)(stage="hlo")
    assert "ENTRY" in hlo and "f32[8,3,40]" in hlo  # the MLM logits, fully static


def test_resume_restores_everything_and_other_tools_read_the_run(files, tmp_path):
    google = str(tmp_path / "google")
    source, heads = random_encoder(GOOGLE_CONFIG, seed=3), random_heads(GOOGLE_CONFIG)
    write_google_checkpoint(google, {**google_arrays(source), **heads}, GOOGLE_CONFIG)
    output_dir = str(tmp_path / "run")
    # One warmup step: its learning rate is 0, so the weights stay the Google checkpoint's
    # while the optimizer's moments and iteration count, the step and the RNGs move.
    first = make_trainer(GOOGLE_CONFIG, num_train_steps=1, num_warmup_steps=1)
    metrics = first.train(dataset_fn(files), output_dir, init_checkpoint=google, progress=False)
    assert np.isfinite(metrics["loss"])
    for loaded, original in zip(first.model.encoder.weights, source.weights):
        np.testing.assert_array_equal(loaded.numpy(), original.numpy(), err_msg=original.path)
    assert sorted(os.listdir(output_dir)) == ["checkpoint", "ckpt-1.data-00000-of-00001",
                                              "ckpt-1.index", "train"]
    second = make_trainer(GOOGLE_CONFIG, num_train_steps=1, num_warmup_steps=1)
    assert second.train(dataset_fn(files), output_dir, progress=False) == {}  # nothing left
    assert int(second.global_step.numpy()) == 1
    assert int(second.optimizer.iterations.numpy()) == 1
    for a, b in zip(second.model.variables + second.optimizer.variables,
                    first.model.variables + first.optimizer.variables):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=a.path)
    assert any("seed_generator_state" in v.path for v in second.model.variables)
    # The run's output is a checkpoint for every tool: the encoder and the heads by name.
    weights = read_weights(output_dir, config=GOOGLE_CONFIG)
    for name, array in heads.items():
        np.testing.assert_array_equal(weights.arrays[name], array)


class _ReversedSet(set):
    """A set iterated in reverse sorted order: any order a hash seed may give."""

    def __iter__(self):
        return iter(sorted(super().__iter__(), reverse=True))


def test_the_progress_bar_shows_its_metrics_in_one_order(files, tmp_path, monkeypatch):
    shown = []

    class RecordingProgbar(ResumableProgbar):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.stateful_metrics = _ReversedSet(self.stateful_metrics)

        def update(self, current, values=None, **kwargs):
            shown.append([name for name, _ in values or []])
            super().update(current, values, **kwargs)

    monkeypatch.setattr(pretraining_trainer, "ResumableProgbar", RecordingProgbar)
    make_trainer(num_train_steps=2).train(dataset_fn(files), str(tmp_path), progress=False)
    assert shown == [[]] + [["loss", "masked_lm_accuracy", "next_sentence_accuracy"]] * 2


def test_bad_arguments_are_clear_errors():
    with pytest.raises(ValueError, match="batch size 8 must split evenly over 1 replica"
                                         r"\(s\) x 3 accumulation step"):
        make_trainer(gradient_accumulation_steps=3)
    with pytest.raises(ValueError, match="mixed_precision must be one of"):
        make_trainer(mixed_precision="int8")
