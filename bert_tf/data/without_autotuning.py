"""`without_autotuning`: a dataset whose iterators end at once.

Example:
    >>> for batch in without_autotuning(batches):   # the loop's end does not wait
    ...     step(batch)
"""

import tensorflow as tf


def without_autotuning(dataset):
    """`dataset` without tf.data's autotuning thread: its `AUTOTUNE` parallel calls and
    prefetch buffers take TensorFlow's defaults instead.

    Deleting an iterator of an autotuned dataset (when a training loop or `fit` returns, when a
    `for` loop ends) stops that thread, and sometimes waits out its sleep: the thread sleeps
    between tunings for a period that doubles up to a minute, and TensorFlow (2.21) wakes it
    before marking the iterator cancelled, so a thread that wakes first sleeps again for the
    rest of its period. An iterator read for 3 s then deleted, 30 times (2-vCPU Intel Xeon,
    its cores busy: `bench/iterator_deletion.py`): 3-9 deletions took 2.1 s, the others 0.01
    s; without autotuning all 30 took 0.01-0.02 s.
    After a long run that is up to a minute: a pre-training phase once ended 61 s after its
    last evaluation instead of 1-2 s; `tools/run_classifier.py`'s `fit` returned 0-15 s after
    its final checkpoint (SST-2, MiniLM, 4,000 examples, 2-vCPU AMD EPYC), 0.1 s without
    autotuning, at the same step time. The defaults cost nothing measurable: pre-training's
    pipelines read alone (2-vCPU Intel Xeon, three turns each) gave 885-1051 batches/s either
    way from records (128 x 32) and 41-47 untuned against 36-40 autotuned from text with
    dynamic masking (32 x 128), against ~3 training steps/s of bert_mini.
    """
    options = tf.data.Options()
    options.autotune.enabled = False
    return dataset.with_options(options)
