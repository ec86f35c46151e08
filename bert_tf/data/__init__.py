"""Data for BERT, by role.

- `bert_tf.data.pretraining`: corpora, instances, masking, pre-training TFRecords (writing and
  reading) and dynamic masking straight from text.
- `bert_tf.data.tasks`: the fine-tuning tasks' readers (GLUE, SQuAD, CoNLL-2003, SWAG), their
  windowing, and the batching they share (dynamic padding, chunked packing).
- `bert_tf.data.tfds`: TensorFlow Datasets as a data source.
"""
