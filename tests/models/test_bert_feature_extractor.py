import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.models.bert_feature_extractor import BertFeatureExtractor
from tests.harness import check_task_model
from tests.models.head_fixtures import TINY, ToyPreprocessor, encoder_inputs, tiny_encoder

FOUR_LAYERS = dataclasses.replace(TINY, num_hidden_layers=4)
INPUTS = encoder_inputs(np.arange(3, 17).reshape(2, 7), lengths=[7, 3])


@pytest.fixture(scope="module")
def encoder():
    return tiny_encoder(config=FOUR_LAYERS)


def test_default_is_the_papers_concat_of_the_last_four_layers(encoder):
    features = BertFeatureExtractor(encoder)(INPUTS)["features"]
    layers = encoder(INPUTS)["encoder_outputs"]
    assert features.shape == (2, 7, 4 * 16)
    np.testing.assert_allclose(features, np.concatenate(layers, axis=-1), atol=1e-6)


def test_chosen_layers_in_the_given_order(encoder):
    features = BertFeatureExtractor(encoder, layer_indices=[0, -1])(INPUTS)["features"]
    layers = encoder(INPUTS)["encoder_outputs"]
    np.testing.assert_allclose(features, np.concatenate([layers[0], layers[3]], -1), atol=1e-6)


def test_weighted_sum_of_layers(encoder):
    extractor = BertFeatureExtractor(encoder, layer_indices=[1, 2, 3], combine="weighted_sum")
    logits = np.array([0.5, -1.0, 2.0], np.float32)
    extractor.layer_sum.layer_weights.assign(logits)
    weights = np.exp(logits) / np.exp(logits).sum()
    layers = encoder(INPUTS)["encoder_outputs"]
    expected = sum(w * np.asarray(layers[i]) for w, i in zip(weights, [1, 2, 3]))
    features = extractor(INPUTS)["features"]
    assert features.shape == (2, 7, 16)
    np.testing.assert_allclose(features, expected, atol=1e-5)


def test_xla_keras_file_and_checkpoint_round_trips_with_preprocessor(encoder):
    extractor = BertFeatureExtractor(encoder, layer_indices=[-2, -1], combine="weighted_sum",
                                     preprocessor=ToyPreprocessor())
    extractor.layer_sum.layer_weights.assign([0.3, -0.3])
    restored = check_task_model(extractor, INPUTS, raw_inputs=tf.constant(["some words", "more"]),
                                load_arguments={"layer_indices": [-2, -1],
                                                "combine": "weighted_sum"})
    assert restored.layer_indices == [-2, -1] and restored.combine == "weighted_sum"


def test_bad_arguments_are_clear_errors(encoder):
    with pytest.raises(ValueError, match=r"integers in \[-4, 3\] \(the encoder has 4 layers\), "
                                         r"got \[4\]"):
        BertFeatureExtractor(encoder, layer_indices=[4])
    with pytest.raises(ValueError, match="got \\[\\]"):
        BertFeatureExtractor(encoder, layer_indices=[])
    with pytest.raises(ValueError, match="combine must be one of .* got 'mean'"):
        BertFeatureExtractor(encoder, combine="mean")


def test_layer_indices_may_be_numpy_integers(encoder):
    # e.g. `np.arange(-4, 0)`; they used to be refused as "not integers".
    extractor = BertFeatureExtractor(encoder, layer_indices=np.arange(-2, 0))
    assert extractor.layer_indices == [-2, -1]
    assert all(type(i) is int for i in extractor.get_config()["layer_indices"])
    with pytest.raises(ValueError, match=r"got \[True\]"):
        BertFeatureExtractor(encoder, layer_indices=[True])
