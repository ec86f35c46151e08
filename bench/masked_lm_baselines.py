"""What a held-out masked-LM accuracy is worth: the accuracy of counting predictors on the same
pre-training records, the yardstick of `bench/pretraining_convergence.py`'s curve.

Each predictor guesses a masked token as the most frequent one seen in the training records'
*unmasked* text (the masked positions filled back in with their labels) in the same context:

- unigram: no context (always the most frequent token);
- left neighbour: the token just before it (a bigram model);
- both neighbours: the tokens just before and after it, falling back to the left neighbour
  when that pair never occurred (a "fill the gap" trigram model).

Contexts are read from the held-out records as the model sees them (a neighbour may itself be
[MASK]). A model that only learned token frequencies scores like the unigram; one that reads
the neighbouring tokens, like the bigram or trigram.

Example (the records of the convergence run):
    .venv/bin/python bench/masked_lm_baselines.py \\
        --train_records='/tmp/bert_tf_convergence/data/records/train-seq128-pred52-mask0.4/*' \\
        --heldout_records=/tmp/bert_tf_convergence/data/records/heldout-seq128/heldout.tfrecord
"""

import collections
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from absl import app, flags  # noqa: E402

from bert_tf.data.pretraining.records_dataset import (  # noqa: E402
    expand_input_files, feature_spec, read_records, record_lengths)

FLAGS = flags.FLAGS
flags.DEFINE_string("train_records", None, "Comma-separated globs of training records.")
flags.DEFINE_string("heldout_records", None, "Comma-separated globs of held-out records.")


def read(patterns):
    """The records of `patterns` as NumPy arrays keyed by feature name."""
    files = expand_input_files(patterns)
    spec = feature_spec(*record_lengths(files[0]))
    batches = [tf.io.parse_example(batch, spec) for path in files
               for batch in read_records(path).batch(4096)]
    return {name: np.concatenate([batch[name].numpy() for batch in batches]) for name in spec}


def unmasked_ids(records):
    """`input_ids` with every masked position set back to its label."""
    ids = records["input_ids"].copy()
    for row, positions, labels, weights in zip(ids, records["masked_lm_positions"],
                                               records["masked_lm_ids"],
                                               records["masked_lm_weights"]):
        real = weights > 0
        row[positions[real]] = labels[real]
    return ids


def context_counts(sequences, lengths):
    """Token counts overall, after each left neighbour and between each neighbour pair."""
    unigram, left, both = (collections.Counter(), collections.defaultdict(collections.Counter),
                           collections.defaultdict(collections.Counter))
    for row, length in zip(sequences, lengths):
        for j in range(1, length - 1):  # [CLS] and the last [SEP] are never masked
            unigram[row[j]] += 1
            left[row[j - 1]][row[j]] += 1
            both[(row[j - 1], row[j + 1])][row[j]] += 1
    return unigram, left, both


def baseline_accuracies(train, heldout):
    """`{predictor: held-out accuracy}` and the number of held-out predictions."""
    unigram, left, both = context_counts(unmasked_ids(train), train["input_mask"].sum(axis=1))
    most_frequent = unigram.most_common(1)[0][0]
    hits, total = collections.Counter(), 0
    for row, positions, labels, weights in zip(heldout["input_ids"],
                                               heldout["masked_lm_positions"],
                                               heldout["masked_lm_ids"],
                                               heldout["masked_lm_weights"]):
        for position, label in zip(positions[weights > 0], labels[weights > 0]):
            total += 1
            before, after = row[position - 1], row[position + 1]
            by_left = left.get(before)
            by_both = both.get((before, after)) or by_left
            hits["unigram"] += label == most_frequent
            hits["left neighbour"] += bool(by_left) and by_left.most_common(1)[0][0] == label
            hits["both neighbours"] += bool(by_both) and by_both.most_common(1)[0][0] == label
    return {name: hits[name] / total for name in ("unigram", "left neighbour",
                                                  "both neighbours")}, total


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    if not FLAGS.train_records or not FLAGS.heldout_records:
        raise app.UsageError("--train_records and --heldout_records are required")
    accuracies, total = baseline_accuracies(read(FLAGS.train_records),
                                            read(FLAGS.heldout_records))
    print(f"Held-out masked-LM accuracy of counting predictors ({total:,} predictions):")
    print("| predictor | accuracy |\n|---|---|")
    for name, accuracy in accuracies.items():
        print(f"| {name} | {accuracy:.3f} |")


if __name__ == "__main__":
    app.run(main)
