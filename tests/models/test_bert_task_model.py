import numpy as np
import pytest
import tensorflow as tf

from bert_tf.models.bert_classifier import BertClassifier
from bert_tf.models.bert_multiple_choice import BertMultipleChoice
from tests.harness import assert_outputs_close
from tests.models.head_fixtures import ToyPreprocessor, encoder_inputs, save_and_load, tiny_encoder


def test_a_frozen_task_model_stays_frozen_through_a_keras_file(tmp_path):
    # A model around it trains the variables whose own flag is set: the head of a frozen
    # classifier rebuilt from its config used to be trainable.
    classifier = BertClassifier(tiny_encoder(), num_classes=2)
    classifier.trainable = False
    restored = save_and_load(classifier, tmp_path)
    assert not restored.trainable
    assert [v.path for v in restored.weights if v.trainable] == []
    # The paper's feature-based setup: only the encoder frozen, the head trains.
    classifier.trainable = True
    classifier.encoder.trainable = False
    restored = save_and_load(classifier, tmp_path)
    assert restored.trainable and not restored.encoder.trainable
    assert sorted(v.path for v in restored.trainable_weights) == [
        "classifier/bias", "classifier/kernel"]


def test_num_classes_may_be_a_numpy_integer(tmp_path):
    # `labels.max() + 1` is one; it used to be refused as "not a positive integer".
    classifier = BertClassifier(tiny_encoder(), num_classes=np.int64(3))
    assert classifier.num_classes == 3 and type(classifier.num_classes) is int
    assert save_and_load(classifier, tmp_path).num_classes == 3
    for bad in (0, 2.0, True, "3"):
        with pytest.raises(ValueError, match=f"num_classes must be a positive integer, got "
                                             f"{bad!r}"):
            BertClassifier(tiny_encoder(), num_classes=bad)


@pytest.mark.parametrize("make, inputs", [
    (lambda: BertClassifier(tiny_encoder(), num_classes=2),
     encoder_inputs([[1, 5, 6, 2, 0]], lengths=[4])),
    (lambda: BertMultipleChoice(tiny_encoder()), encoder_inputs([[[1, 5, 2], [1, 6, 2]]])),
])
def test_export_serves_the_encoder_input_dict(tmp_path, make, inputs):
    # Keras asked for a first call even after one: it infers signatures from shapes that a
    # model built in __init__ never records.
    model = make()
    model.export(str(tmp_path / "model"), verbose=False)
    loaded = tf.saved_model.load(str(tmp_path / "model"))
    served = loaded.serve(inputs)
    assert_outputs_close(served, model(inputs), atol=1e-6)


def test_export_with_a_preprocessor_asks_for_the_raw_text_signature(tmp_path):
    classifier = BertClassifier(tiny_encoder(), num_classes=2, preprocessor=ToyPreprocessor())
    with pytest.raises(ValueError, match=r"BertClassifier.export: pass input_signature= for the "
                                         r"raw text"):
        classifier.export(str(tmp_path / "model"))
    classifier.export(str(tmp_path / "model"), verbose=False,
                      input_signature=[tf.TensorSpec([None], tf.string)])
    texts = tf.constant(["some words", "more"])
    loaded = tf.saved_model.load(str(tmp_path / "model"))
    served = loaded.serve(texts)
    assert_outputs_close(served, classifier(texts), atol=1e-6)


def test_more_text_segments_than_token_types_are_named():
    # Segment i is packed with input_type_ids i: a third segment failed deep in the graph with
    # "indices[0,5] = 2 is not in [0, 2)".
    texts = [tf.constant(["a b"]), tf.constant(["c"])]
    classifier = BertClassifier(tiny_encoder(), num_classes=2, preprocessor=ToyPreprocessor())
    assert classifier(texts)["logits"].shape == (1, 2)
    with pytest.raises(ValueError, match=r"BertClassifier: 3 text segments need input_type_ids "
                                         r"0 to 2, but the encoder's type_vocab_size is 2: pass "
                                         r"at most 2 segments"):
        classifier(texts + [tf.constant(["d"])])
    choices = BertMultipleChoice(tiny_encoder(), preprocessor=ToyPreprocessor())
    with pytest.raises(ValueError, match=r"BertMultipleChoice: 3 text segments"):
        choices([tf.constant([["a", "b"]])] * 3)
