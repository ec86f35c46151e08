"""The names of the tf.distribute strategies `distribution.create_strategy` builds, apart from
it and TensorFlow: run_pretraining's --strategy offers them when it defines its flags, before
TensorFlow loads.

Example:
    >>> "mirrored" in STRATEGIES
    True
"""

STRATEGIES = ("tpu", "mirrored", "multi_worker_mirrored", "one_device", "cpu")
