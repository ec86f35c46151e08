"""A Keras model's inference forward with its weights as graph constants, for serving exports.

oneDNN reorders a matmul's weights into its blocked layout on every call when they are
variables, and caches the reordered copy when they are constants; grappler also folds the
bfloat16 casts of constant float32 weights (`mixed_bfloat16`) into bfloat16 constants. At
batch 1 that per-call work is a large part of a forward pass. Measured in one process, p50 of
80 calls (AMD EPYC, 2 vCPU, avx512_bf16, no AMX; `/tmp`-free script in docs/PERFORMANCE.md):

| model, inputs | variables | constants |
| --- | --- | --- |
| MiniLM classifier, float32, 1 x 24 tokens | 8.6 ms | 7.4 ms |
| BERT-base classifier, float32, 1 x 128 | 127 ms | 107 ms |
| BERT-base classifier, mixed_bfloat16, 1 x 128 | 101 ms | 84 ms |

Task exports are for serving (nothing trains them further), so they embed the weights this
way; the encoder export keeps variables, which fine-tuning through TF Hub needs.

Example:
    >>> forward = FrozenModel(classifier, rank=2)
    >>> forward({"input_word_ids": ids, "input_mask": mask, "input_type_ids": types})["logits"]
"""

import tensorflow as tf
# TensorFlow's freezing utility (the one TFLite conversion uses); it has no public alias.
from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

INPUT_KEYS = ("input_word_ids", "input_mask", "input_type_ids")

# A GraphDef, which holds the constants, cannot exceed 2 GiB (protobuf's limit); BERT-large
# in float32 is 1.34 GB. Larger models keep their weights as variables.
MAX_FROZEN_WEIGHT_BYTES = 1_800_000_000


def weight_bytes(model):
    """The bytes of `model`'s weights."""
    return sum(v.numpy().nbytes for v in model.weights)


class FrozenModel:
    """Calls `model(inputs, training=False)` on int32 inputs of `rank` dimensions (2:
    `[batch, seq]`; 3: `[batch, choices, seq]`), through a graph with its weights as
    constants. Build it eagerly (outside any `tf.function`): freezing reads the weights."""

    def __init__(self, model, rank):
        signature = {key: tf.TensorSpec([None] * rank, tf.int32, name=key) for key in INPUT_KEYS}
        forward = tf.function(lambda inputs: model(inputs, training=False), autograph=False)
        concrete = forward.get_concrete_function(signature)
        self._outputs = concrete.structured_outputs
        self._frozen = convert_variables_to_constants_v2(concrete)

    def __call__(self, inputs, training=False):
        if training:
            raise ValueError("A FrozenModel runs inference only (training=False).")
        # The frozen function takes the inputs flat, in tf.nest's (sorted-key) order.
        flat = tf.nest.flatten({key: inputs[key] for key in INPUT_KEYS})
        return tf.nest.pack_sequence_as(self._outputs, self._frozen(*flat))
