"""Evaluation for the paper's tasks, computed as the official scripts do.

- `bert_tf.metrics.glue`: accuracy, F1, Matthews correlation, Pearson/Spearman; `glue_metrics`.
- `bert_tf.metrics.squad`: SQuAD v1.1 / v2.0 exact match and F1.
- `bert_tf.metrics.squad_postprocess`: span logits back to answer text (n-best, no-answer).
- `bert_tf.metrics.sequence_labeling`: entity-level F1 for IOB/IOB2/IOBES tags (seqeval rules).
"""
