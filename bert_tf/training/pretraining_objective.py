"""BERT's pre-training loss and metrics, as Google's `run_pretraining.py` defines them, built
from sums so that they are exact however a batch is split.

Google's loss is the masked-LM cross-entropy averaged over the real predictions (weighted by
`masked_lm_weights`, which are 0 on the padding of `masked_lm_positions`) plus the
next-sentence cross-entropy averaged over the examples. Averaging per replica (or per
micro-batch) and then averaging those averages is *not* that loss when replicas hold different
numbers of real predictions; dividing each replica's sum by the whole batch's count is. So a
step first computes `statistics` (sums) per replica, and the loss divides by global totals.

Example:
    >>> stats = pretraining_statistics(pretrainer(features), features)
    >>> loss = pretraining_loss(stats, total_masked_lm_weight=stats["masked_lm_weight"],
    ...                         total_examples=stats["examples"])
    >>> pretraining_metrics({k: float(v) for k, v in stats.items()})["masked_lm_accuracy"]
"""

import tensorflow as tf

from bert_tf.xla_host import host_jit_compile

STATISTICS = ("masked_lm_loss_sum", "masked_lm_correct", "masked_lm_weight",
              "next_sentence_loss_sum", "next_sentence_correct", "examples")

METRICS = ("loss", "masked_lm_loss", "masked_lm_accuracy", "next_sentence_loss",
           "next_sentence_accuracy")

# Google's run_pretraining.py adds this to the masked-LM denominator (a batch could hold no
# real prediction at all).
_DENOMINATOR_EPSILON = 1e-5


# XLA-compiled even inside a train step that is not: over [predictions, vocab] logits, TF's own
# CPU kernels for the cross-entropy (and its gradient) and the argmax take ~4x the time of
# XLA's fused loops (measured on bert_mini, batch 32: the step went from ~880 to ~835 ms).
@tf.function(jit_compile=host_jit_compile(), autograph=False)
def _weighted_sums(logits, labels, weights):
    """`(sum of weights x cross-entropy, sum of weights x correct)` of `logits [..., classes]`
    against the int32 `labels` (`weights` has their shape)."""
    losses = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    correct = tf.cast(tf.equal(tf.argmax(logits, axis=-1, output_type=tf.int32), labels),
                      tf.float32)
    return tf.reduce_sum(weights * losses), tf.reduce_sum(weights * correct)


def pretraining_statistics(outputs, features):
    """Float32 scalar sums over a batch: the `STATISTICS` names.

    Args:
      outputs: `BertPretrainer` outputs (`mlm_logits`, `next_sentence_logits`).
      features: the batch (`masked_lm_ids`, `masked_lm_weights`, `next_sentence_labels`,
        `input_mask`). An example whose `input_mask` is all zeros is padding (evaluation
        completes its last batch with such) and counts for nothing.
    """
    mlm_weights = tf.cast(features["masked_lm_weights"], tf.float32)
    mlm_loss_sum, mlm_correct = _weighted_sums(
        outputs["mlm_logits"], tf.cast(features["masked_lm_ids"], tf.int32), mlm_weights)
    # A real example's mask is 1 at [CLS] (position 0).
    example_weights = tf.cast(features["input_mask"][:, 0], tf.float32)
    nsp_loss_sum, nsp_correct = _weighted_sums(
        outputs["next_sentence_logits"], tf.cast(features["next_sentence_labels"], tf.int32),
        example_weights)
    return {
        "masked_lm_loss_sum": mlm_loss_sum,
        "masked_lm_correct": mlm_correct,
        "masked_lm_weight": tf.reduce_sum(mlm_weights),
        "next_sentence_loss_sum": nsp_loss_sum,
        "next_sentence_correct": nsp_correct,
        "examples": tf.reduce_sum(example_weights),
    }


def pretraining_loss(statistics, total_masked_lm_weight, total_examples):
    """This batch's share of the loss of the whole (global) batch whose totals are given:
    summed over all shares, it is Google's `masked_lm_loss + next_sentence_loss`."""
    return (statistics["masked_lm_loss_sum"] / (total_masked_lm_weight + _DENOMINATOR_EPSILON)
            + statistics["next_sentence_loss_sum"] / total_examples)


def pretraining_metrics(totals):
    """The `METRICS` (Python floats) from `STATISTICS` summed over any number of batches; the
    means Google's `run_pretraining.py` evaluation reports (`masked_lm_*` weighted by
    `masked_lm_weights`)."""
    totals = {name: float(totals[name]) for name in STATISTICS}
    mlm_count = max(totals["masked_lm_weight"], _DENOMINATOR_EPSILON)
    examples = max(totals["examples"], 1.0)
    metrics = {
        "masked_lm_loss": totals["masked_lm_loss_sum"] / mlm_count,
        "masked_lm_accuracy": totals["masked_lm_correct"] / mlm_count,
        "next_sentence_loss": totals["next_sentence_loss_sum"] / examples,
        "next_sentence_accuracy": totals["next_sentence_correct"] / examples,
    }
    metrics["loss"] = metrics["masked_lm_loss"] + metrics["next_sentence_loss"]
    return {name: metrics[name] for name in METRICS}
