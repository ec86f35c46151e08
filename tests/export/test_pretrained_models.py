"""What the encoder exports load: the encoder, with or without the checkpoint's MLM head, and
the vocabulary beside the checkpoint."""

import os

import numpy as np
import pytest

from bert_tf import BertEncoder
from bert_tf.checkpoints import (CheckpointMismatchError, has_pretraining_heads, load_model,
                                 save_checkpoint, vocab_beside_checkpoint)
from bert_tf.models.bert_pretrainer import BertPretrainer
from tests.export.tiny_models import tiny_config


@pytest.fixture(scope="module")
def encoder_only(tmp_path_factory):
    """A checkpoint without pre-training heads and without vocab.txt."""
    directory = str(tmp_path_factory.mktemp("encoder_only"))
    encoder = BertEncoder(tiny_config(num_hidden_layers=1))
    save_checkpoint(directory, encoder)
    return directory, encoder


def test_the_mlm_head_is_loaded_when_asked(pretrained):
    directory, written = pretrained
    assert has_pretraining_heads(directory)
    loaded = load_model(directory, BertPretrainer)
    assert isinstance(loaded, BertPretrainer)
    np.testing.assert_array_equal(loaded.masked_lm.output_bias.numpy(),
                                  written.masked_lm.output_bias.numpy())
    encoder = load_model(directory)
    assert isinstance(encoder, BertEncoder)
    np.testing.assert_array_equal(encoder.pooler.kernel.numpy(),
                                  written.encoder.pooler.kernel.numpy())


def test_a_checkpoint_without_heads_gives_the_encoder_or_an_error(encoder_only):
    directory, written = encoder_only
    assert not has_pretraining_heads(directory)
    encoder = load_model(directory)
    assert isinstance(encoder, BertEncoder)
    np.testing.assert_array_equal(encoder.embeddings.word_embeddings.numpy(),
                                  written.embeddings.word_embeddings.numpy())
    with pytest.raises(CheckpointMismatchError, match="cls/predictions/output_bias"):
        load_model(directory, BertPretrainer)
    with pytest.raises(ValueError, match="pretraining_heads must be one of"):
        load_model(directory, BertPretrainer, pretraining_heads="yes")


def test_the_vocabulary_is_found_beside_the_checkpoint(pretrained, encoder_only):
    assert vocab_beside_checkpoint(pretrained[0]) == os.path.join(pretrained[0], "vocab.txt")
    with pytest.raises(FileNotFoundError, match="pass the model's vocabulary with --vocab_file"):
        vocab_beside_checkpoint(encoder_only[0])
