"""`compute_weight`: a float32 weight in a layer's compute dtype, and the record of those casts
that the optimizer schedules its own work around (`weight_casts`).

Under mixed precision every training step casts each float32 kernel and bias to bfloat16
before its matmul. None of those casts depends on the step's data, so they are all ready when
the step starts. So is AdamW's zero-gradient step over the word-embedding table
(`bert_tf.training.optimizers._adamw_rows_update`), which needs no gradient either and holds a
core for as long as it runs (MiniLM's `[30522, 384]` table: ~19 ms of a ~80 ms fine-tuning
step at 32 x 8 tokens). Started together, the table's step took one core and the casts of all
six layers the other for the first ~9 ms, while the forward pass, the step's critical path,
waited for a free core. The table's step now waits for the casts (`weight_casts`): both cores
cast first, then one runs the table's step while the other runs the forward pass. MiniLM's
fine-tuning step (bfloat16, one intra-op thread, 2-vCPU Xeon with AMX, both versions in one
process taking turns, 12 rounds of 4 steps): 4.0-5.1 % faster at 32 x 8 to 32 x 24 tokens
(82.4 against 85.8 ms at 32 x 8), 1.6 % at 32 x 32.

Example:
    >>> kernel = compute_weight(layer.kernel, "bfloat16")   # in a tf.function: recorded
    >>> weight_casts()                                      # [its Cast op, ...] in this graph
"""

import weakref

import tensorflow as tf

# The names of the cast ops traced so far, per graph: a traced step's own casts are the ones
# its ops can wait on. Weak keys, and names rather than ops (an op would hold its graph): a
# graph's record goes with the graph.
_CASTS = weakref.WeakKeyDictionary()


def compute_weight(variable, dtype):
    """`variable` (a Keras or TensorFlow variable, or a tensor) cast to `dtype`; in a graph a
    weight read in a 16-bit dtype is recorded for `weight_casts`. (Inside a Keras layer's call
    under mixed precision, Keras' autocast already casts on reading the variable: the record
    names that cast.)"""
    value = tf.cast(variable, dtype)
    if not tf.executing_eagerly() and value.dtype in (tf.bfloat16, tf.float16):
        _CASTS.setdefault(value.graph, []).append(value.op.name)
    return value


def weight_casts(graph=None):
    """The ops of `compute_weight`'s casts traced in `graph` (default: the current graph)."""
    graph = graph if graph is not None else tf.compat.v1.get_default_graph()
    return [graph.get_operation_by_name(name) for name in _CASTS.get(graph, ())]
