"""The export at the end of pre-training: the encoder with its masked-LM head as a SavedModel
in TF Serving's layout, versioned by the global step.

Example:
    >>> export_pretrained(trainer.model, "/tmp/pretrain/export", 10000, "vocab.txt", True)
    '/tmp/pretrain/export/10000'
"""

import logging
import os

import tensorflow as tf

from bert_tf.export import export_encoder, write_version

logger = logging.getLogger("bert_tf.training")


def export_pretrained(pretrainer, export_dir, step, vocab_file, do_lower_case):
    """Exports `pretrainer` (a `BertPretrainer`) to `<export_dir>/<step>/` unless that version
    exists already (a rerun of a finished job); returns its path."""
    path = os.path.join(export_dir, str(step))
    if tf.io.gfile.exists(path):  # local or remote (gs://...)
        logger.info("%s exists already: not exported again", path)
        return path
    path = write_version(export_dir, lambda directory: export_encoder(
        directory, pretrainer, vocab_file, do_lower_case), version=step)
    logger.info("Exported the encoder (with its masked-LM head) to %s", path)
    return path
