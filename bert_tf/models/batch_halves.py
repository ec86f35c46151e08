"""`in_batch_halves`: a model's pass over a batch as two independent passes over its halves.

With one thread per op (`--tensorflow_intra_op_parallelism=1`, how fine-tuning on short texts
runs fastest on a CPU), TensorFlow keeps a second core busy only with an op that does not
depend on the one running, and a pass over the whole batch is mostly one chain of ops: in a
profile of MiniLM's fine-tuning step the two cores were busy 73 % of it. The halves' passes
share no op until their outputs are joined, forward and backward, so each core runs one.
MiniLM's fine-tuning step, bfloat16, one intra-op thread (2-vCPU AMD EPYC, avx512_bf16, no
AMX), median step (`bench/finetune_profile.py --timed_seq_lengths=...`): whole batch 79.6 /
131.2 / 242.0 ms at 32 x 8 / 16 / 32 tokens, in halves 78.3 / 116.1 / 205.5. Against the
split it replaces (the feed-forward in two halves of its units): 32 x 64 458.5 -> 388.6 ms,
32 x 128 1095.9 -> 856.8; on SST-2's short batches alike (500 steps, taking turns: 0.121 and
0.124 s per step against 0.126 and 0.124). Each half casts the weights itself: one cast
shared by the two, which joins them at every weight (its gradient waits for both halves), was
4-5 % slower at every length (one process taking turns).

Example:
    >>> logits = in_batch_halves(lambda half: model(half, training=True), features)
"""

import tensorflow as tf


def in_batch_halves(call, inputs):
    """`call(inputs)`, computed as `call` on each half of the batch (axis 0 of every tensor in
    the nest `inputs`) and the two outputs (nests of tensors) concatenated on axis 0. An odd
    batch of n splits into (n + 1) // 2 and n // 2 examples; a batch of one leaves the second
    half empty."""
    flat = tf.nest.flatten(inputs)
    size = tf.shape(flat[0])[0]
    halves = zip(*[tf.split(tensor, tf.stack([(size + 1) // 2, size // 2])) for tensor in flat])
    outputs = [call(tf.nest.pack_sequence_as(inputs, list(half))) for half in halves]
    return tf.nest.map_structure(lambda first, second: tf.concat([first, second], 0), *outputs)
