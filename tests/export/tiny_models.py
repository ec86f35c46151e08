"""What the export, hub and tool tests share: a tiny vocabulary, tiny BERTs, their checkpoints.

Example:
    >>> vocab_file = write_vocab(tmp_path)
    >>> pretrainer = write_pretrained_checkpoint(tmp_path / "ckpt", vocab_file)
"""

import os

import keras
import numpy as np
import tensorflow as tf

from bert_tf import BertConfig, BertEncoder
from bert_tf.checkpoints import pretraining_head_weights, save_checkpoint, training_checkpoint
from bert_tf.models.bert_pretrainer import BertPretrainer

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world", "un", "##aff", "##able",
         "what", "is", "the", "a", "good", "bad", "movie", "film", "##s", ",", "?", "!", "."]


def write_vocab(directory):
    path = os.path.join(directory, "vocab.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(VOCAB) + "\n")
    return path


def tiny_config(num_hidden_layers=2):
    # Dropout stays on (0.1): the training=True graphs must differ from inference.
    return BertConfig(vocab_size=len(VOCAB), hidden_size=16, num_hidden_layers=num_hidden_layers,
                      num_attention_heads=2, intermediate_size=32, max_position_embeddings=64)


def write_pretrained_checkpoint(directory, vocab_file, num_hidden_layers=2, seed=0):
    """A random BertPretrainer saved as a converted checkpoint (encoder + pre-training heads,
    bert_config.json, vocab.txt) in `directory`; returns the pretrainer."""
    keras.utils.set_random_seed(seed)
    pretrainer = BertPretrainer(BertEncoder(tiny_config(num_hidden_layers)))
    # Random heads would have a zero output bias: give it values, so that loading it shows.
    pretrainer.masked_lm.output_bias.assign(np.linspace(-1, 1, len(VOCAB), dtype=np.float32))
    heads = {name: variable.numpy() for name, variable in pretraining_head_weights(pretrainer)}
    save_checkpoint(directory, pretrainer.encoder, heads=heads, vocab_file=vocab_file)
    return pretrainer


def write_task_checkpoint(directory, model):
    """Saves a task model as fine-tuning tools do (encoder and task model), config beside."""
    prefix = training_checkpoint(model.encoder, task_model=model).write(
        os.path.join(directory, "ckpt-1"))
    model.encoder.config.to_json_file(os.path.join(directory, "bert_config.json"))
    return prefix


def encoder_inputs(rows, seq_length):
    """The encoder's int32 input dict for lists of token ids, padded to `seq_length`; the
    second half of each row is segment 1."""
    ids = np.zeros([len(rows), seq_length], np.int32)
    types = np.zeros_like(ids)
    for i, row in enumerate(rows):
        ids[i, :len(row)] = row
        types[i, len(row) // 2:len(row)] = 1
    return {"input_word_ids": tf.constant(ids), "input_mask": tf.constant(np.sign(ids)),
            "input_type_ids": tf.constant(types)}
