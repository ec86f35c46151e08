"""Reading, converting, loading and writing BERT checkpoints.

Formats (see `detect_format`):
  * Google's TF1 checkpoints (`bert_model.ckpt.*`, names `bert/...` and `cls/...`);
  * Hugging Face safetensors (`model.safetensors` + `config.json`; never PyTorch pickles);
  * this package's TF2 checkpoint, whose object layout `layout.py` describes (`encoder`,
    `pretraining_heads`, `model`, `optimizer`, ...).

Every reader returns float32 arrays keyed by Google's names in Google's layout (`names.py` is
the one table of them). `load_model` / `restore_weights` are the one way to load an encoder,
a pre-training model or a task model from any of them.

Example:
    >>> encoder = load_model("converted_dir")                   # config beside the checkpoint
    >>> restore_weights(classifier.encoder, "converted_dir")    # what --init_checkpoint does
    >>> weights = read_weights("uncased_L-12_H-768_A-12")        # Google / HF / bert_tf
    >>> assign_weights([(dense.kernel, "cls/predictions/transform/dense/kernel")], weights.arrays)
"""

from bert_tf.checkpoints.convert import ConversionResult, convert_checkpoint
from bert_tf.checkpoints.errors import DamagedCheckpointError, UnsupportedCheckpointError
from bert_tf.checkpoints.layout import (ENCODER_KEY, HEADS_KEY, TASK_MODEL_KEY, checkpoint_manager,
                                        remove_interrupted_saves, training_checkpoint)
from bert_tf.checkpoints.loading import (CheckpointMismatchError, assign_weights,
                                         load_encoder_weights)
from bert_tf.checkpoints.names import (PRETRAINING_HEAD_NAMES, encoder_weight_names,
                                       encoder_weights, hf_names, hf_transposed,
                                       pretraining_head_weights)
from bert_tf.checkpoints.restore import (RestoreReport, check_task_model_fits,
                                         has_pretraining_heads, load_model, resolve_prefix,
                                         restore_weights)
from bert_tf.checkpoints.sources import (BERT_TF, GOOGLE, HUGGING_FACE, CheckpointWeights,
                                         detect_format, read_config, read_weights,
                                         vocab_beside_checkpoint)
from bert_tf.checkpoints.tf2 import save_checkpoint, write_model_files

__all__ = [
    "BERT_TF", "GOOGLE", "HUGGING_FACE", "ENCODER_KEY", "HEADS_KEY", "PRETRAINING_HEAD_NAMES",
    "TASK_MODEL_KEY", "CheckpointMismatchError", "CheckpointWeights", "ConversionResult",
    "DamagedCheckpointError", "RestoreReport", "UnsupportedCheckpointError", "assign_weights",
    "check_task_model_fits", "checkpoint_manager", "convert_checkpoint", "detect_format",
    "encoder_weight_names", "encoder_weights", "has_pretraining_heads", "hf_names", "hf_transposed",
    "load_encoder_weights", "load_model", "pretraining_head_weights", "read_config", "read_weights",
    "remove_interrupted_saves", "resolve_prefix", "restore_weights", "save_checkpoint",
    "training_checkpoint", "vocab_beside_checkpoint", "write_model_files",
]
