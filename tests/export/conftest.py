"""Fixtures of the export tests: a tiny vocabulary and a tiny pre-trained checkpoint."""

import pytest

from tests.export.tiny_models import write_pretrained_checkpoint, write_vocab


@pytest.fixture(scope="session")
def vocab_file(tmp_path_factory):
    return write_vocab(tmp_path_factory.mktemp("vocab"))


@pytest.fixture(scope="session")
def pretrained(tmp_path_factory, vocab_file):
    """`(checkpoint_dir, pretrainer)`: a converted-style checkpoint with the MLM/NSP heads and
    vocab.txt beside it, and the Keras model it holds (the reference for every output)."""
    directory = str(tmp_path_factory.mktemp("pretrained"))
    return directory, write_pretrained_checkpoint(directory, vocab_file)
