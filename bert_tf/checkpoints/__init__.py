"""Reading, converting and writing BERT checkpoints.

Formats (see `detect_format`):
  * Google's TF1 checkpoints (`bert_model.ckpt.*`, names `bert/...` and `cls/...`);
  * Hugging Face safetensors (`model.safetensors` + `config.json`; never PyTorch pickles);
  * this package's TF2 checkpoint, `tf.train.Checkpoint(encoder=BertEncoder, ...)`.

Every reader returns float32 arrays keyed by Google's names in Google's layout (`names.py` is
the one table of them); `assign_weights` puts such arrays into any Keras variables.

Example:
    >>> encoder = load_encoder("converted_dir")                # config beside the checkpoint
    >>> restore_encoder(my_encoder, "converted_dir")         # what --init_checkpoint does
    >>> weights = read_weights("uncased_L-12_H-768_A-12")     # Google / HF / bert_tf
    >>> assign_weights([(dense.kernel, "cls/predictions/transform/dense/kernel")], weights.arrays)
"""

from bert_tf.checkpoints.convert import ConversionResult, convert_checkpoint
from bert_tf.checkpoints.loading import (CheckpointMismatchError, assign_weights,
                                         load_encoder_weights)
from bert_tf.checkpoints.names import (PRETRAINING_HEAD_NAMES, encoder_weight_names,
                                       encoder_weights, hf_names, hf_transposed)
from bert_tf.checkpoints.sources import (BERT_TF, GOOGLE, HUGGING_FACE, CheckpointWeights,
                                         UnsupportedCheckpointError, detect_format, read_config,
                                         read_weights)
from bert_tf.checkpoints.tf2 import (ENCODER_KEY, HEADS_KEY, TASK_MODEL_KEY, RestoreReport,
                                     load_encoder, resolve_prefix, restore_encoder,
                                     save_checkpoint)

__all__ = [
    "BERT_TF", "GOOGLE", "HUGGING_FACE", "ENCODER_KEY", "HEADS_KEY", "PRETRAINING_HEAD_NAMES",
    "CheckpointMismatchError", "CheckpointWeights", "ConversionResult", "RestoreReport",
    "UnsupportedCheckpointError", "assign_weights", "convert_checkpoint", "detect_format",
    "encoder_weight_names", "encoder_weights", "hf_names", "hf_transposed", "load_encoder",
    "load_encoder_weights", "read_config", "read_weights", "resolve_prefix", "restore_encoder",
    "save_checkpoint", "TASK_MODEL_KEY",
]
