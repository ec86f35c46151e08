"""The training stream of a fine-tuning job: shuffled anew each pass, repeated, in length
buckets, and resumable at any step.

The stream depends only on the examples and the seed, so a job resumed at step `k` sees
exactly the batches an uninterrupted one would have seen from step `k` on.

Example:
    >>> dataset_fn = training_batches_fn(examples, len(texts), batch_size=32, max_seq_length=128,
    ...                                  seed=12345, prepare=lambda raw: pack(raw))
    >>> FineTuner(...).train(dataset_fn)    # calls dataset_fn(start_step)
"""

import tensorflow as tf

from bert_tf.data.tasks.dynamic_padding import bucketed_batches


def training_batches_fn(examples, num_examples, batch_size, max_seq_length, seed, prepare=None,
                        drop_remainder=False):
    """`start_step -> dataset`: `examples` (an unbatched dataset of `num_examples`) shuffled
    with `seed` anew each pass, repeated, mapped through `prepare` (e.g. in-graph tokenization
    of raw texts, cheaper to shuffle than packed ids), batched in length buckets
    (`bucketed_batches`), from batch `start_step` on."""

    def batches(start_step):
        stream = examples.shuffle(num_examples, seed=seed, reshuffle_each_iteration=True).repeat()
        if prepare is not None:
            stream = prepare(stream)
        return (bucketed_batches(stream, batch_size, max_seq_length,
                                 drop_remainder=drop_remainder)
                .skip(start_step).prefetch(tf.data.AUTOTUNE))
    return batches
