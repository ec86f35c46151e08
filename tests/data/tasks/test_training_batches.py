"""bert_tf.data.tasks.training_batches: a fine-tuning job's stream, resumable at any step."""

import numpy as np
import tensorflow as tf

from bert_tf.data.tasks.dynamic_padding import TRAINING_MULTIPLE
from bert_tf.data.tasks.training_batches import training_batches_fn

NUM_EXAMPLES, BATCH, SEQ = 24, 4, 32


def examples():
    """Unbatched `(features, label)`: example i has i % 20 + 1 real tokens, its id as label."""
    lengths = np.arange(NUM_EXAMPLES) % 20 + 1
    mask = (np.arange(SEQ)[None, :] < lengths[:, None]).astype(np.int32)
    features = {"input_word_ids": mask * 7, "input_mask": mask,
                "input_type_ids": np.zeros_like(mask)}
    return tf.data.Dataset.from_tensor_slices((features, np.arange(NUM_EXAMPLES)))


def labels(dataset, batches):
    return [batch[1].numpy().tolist() for batch in dataset.take(batches)]


def test_a_resumed_stream_continues_where_the_first_one_was():
    dataset_fn = training_batches_fn(examples(), NUM_EXAMPLES, BATCH, SEQ, seed=3)
    first = labels(dataset_fn(0), 15)
    assert labels(dataset_fn(6), 9) == first[6:]
    # Over the passes, every example is seen, in batches of one length bucket each.
    seen = sorted(label for batch in first for label in batch)
    assert set(seen) == set(range(NUM_EXAMPLES)) and all(len(batch) == BATCH for batch in first)
    # Another seed, another order.
    other = labels(training_batches_fn(examples(), NUM_EXAMPLES, BATCH, SEQ, seed=4)(0), 15)
    assert other != first


def test_prepare_runs_on_each_example_and_batches_are_trimmed():
    dataset_fn = training_batches_fn(
        examples(), NUM_EXAMPLES, BATCH, SEQ, seed=3,
        prepare=lambda stream: stream.map(lambda features, label: (features, label * 10)))
    for features, label in dataset_fn(0).take(6):
        assert label.numpy().tolist() and all(value % 10 == 0 for value in label.numpy())
        longest = int(features["input_mask"].numpy().sum(axis=1).max())
        multiple = TRAINING_MULTIPLE
        assert features["input_word_ids"].shape[1] == -(-longest // multiple) * multiple
