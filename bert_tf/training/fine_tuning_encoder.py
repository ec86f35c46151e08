"""The encoder a fine-tuning job starts from: pre-trained weights from any checkpoint format,
or fresh ones from a config, in the job's mixed precision.

Example:
    >>> encoder = fine_tuning_encoder("/models/minilm", mixed_precision="bfloat16",
    ...                               max_seq_length=128)
"""

import logging

from bert_tf.checkpoints import load_model
from bert_tf.config import BertConfig
from bert_tf.models.bert_encoder import BertEncoder
from bert_tf.training.mixed_precision import MIXED_PRECISION, warn_if_float16_on_cpu

logger = logging.getLogger("bert_tf.training")


def fine_tuning_encoder(init_checkpoint=None, bert_config_file=None, mixed_precision="float32",
                        max_seq_length=None):
    """The `BertEncoder` to fine-tune.

    Args:
        init_checkpoint: pre-trained weights (Google, Hugging Face or this package's
            checkpoint); None starts from random weights.
        bert_config_file: the config; beside the checkpoint by default, required without one.
        mixed_precision: a key of `MIXED_PRECISION`.
        max_seq_length: the longest input the job will feed; checked against the encoder's
            max_position_embeddings now, because batches padded only to their longest example
            would otherwise fail at the first long batch, deep into training.

    Raises:
        ValueError: max_seq_length exceeds max_position_embeddings.
    """
    dtype = MIXED_PRECISION[mixed_precision]
    warn_if_float16_on_cpu(mixed_precision)
    if init_checkpoint:
        encoder = load_model(init_checkpoint, bert_config_file=bert_config_file, dtype=dtype)
    else:
        logger.warning("No initial checkpoint: fine-tuning an encoder with random weights")
        encoder = BertEncoder(BertConfig.from_json_file(bert_config_file), dtype=dtype)
    limit = encoder.config.max_position_embeddings
    if max_seq_length is not None and max_seq_length > limit:
        raise ValueError(f"max_seq_length {max_seq_length} exceeds the encoder's "
                         f"max_position_embeddings ({limit})")
    return encoder
