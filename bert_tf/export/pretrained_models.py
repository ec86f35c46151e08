"""Loading a pre-trained encoder (optionally with its MLM head) and its vocabulary for export.

Example:
    >>> model = load_pretrained("converted_dir", mlm=True)      # a BertPretrainer
    >>> vocab_file = vocab_beside_checkpoint("converted_dir")   # converted_dir/vocab.txt
"""

import logging
import os

from bert_tf.checkpoints import detect_format, read_config, restore_encoder
from bert_tf.models.bert_encoder import BertEncoder
from bert_tf.models.bert_pretrainer import BertPretrainer

logger = logging.getLogger("bert_tf.export")

MLM_CHOICES = (True, False, "if_present")


def vocab_beside_checkpoint(init_checkpoint):
    """The `vocab.txt` beside a checkpoint (convert_checkpoint.py and Google's downloads put it
    there); FileNotFoundError saying to pass `--vocab_file` when there is none."""
    _, resolved = detect_format(init_checkpoint)
    vocab_file = os.path.join(os.path.dirname(resolved) or ".", "vocab.txt")
    if not os.path.isfile(vocab_file):
        raise FileNotFoundError(f"No vocab.txt beside the checkpoint {resolved}; pass the "
                                f"model's vocabulary with --vocab_file.")
    return vocab_file


def load_pretrained(init_checkpoint, bert_config_file=None, mlm=False):
    """The encoder of `init_checkpoint` (this package's, Google's or Hugging Face's), as a
    `BertEncoder`, or as a `BertPretrainer` carrying the checkpoint's MLM head.

    Args:
        init_checkpoint: checkpoint directory or prefix.
        bert_config_file: the config, when it is not beside the checkpoint.
        mlm: False (encoder only), True (the pre-training heads must be in the checkpoint), or
            "if_present" (a BertPretrainer when the checkpoint has the heads, else the encoder).
    """
    if mlm not in MLM_CHOICES:
        raise ValueError(f"mlm must be one of {MLM_CHOICES}, got {mlm!r}.")
    encoder = BertEncoder(read_config(init_checkpoint, bert_config_file))
    report = restore_encoder(encoder, init_checkpoint)
    if not mlm:
        return encoder
    if mlm == "if_present" and not report.heads:
        logger.info("%s has no pre-training heads: the encoder alone", report.source)
        return encoder
    pretrainer = BertPretrainer(encoder)
    # Reads the checkpoint again, for the heads; every head weight must be there.
    pretrainer.load_checkpoint(init_checkpoint, require_heads=True)
    return pretrainer
