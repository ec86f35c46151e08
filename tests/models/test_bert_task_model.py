import numpy as np
import pytest

from bert_tf.models.bert_classifier import BertClassifier
from tests.models.head_fixtures import save_and_load, tiny_encoder


def test_a_frozen_task_model_stays_frozen_through_a_keras_file(tmp_path):
    # A model around it trains the variables whose own flag is set: the head of a frozen
    # classifier rebuilt from its config used to be trainable.
    classifier = BertClassifier(tiny_encoder(), num_classes=2)
    classifier.trainable = False
    restored = save_and_load(classifier, tmp_path)
    assert not restored.trainable
    assert [v.path for v in restored.weights if v.trainable] == []


def test_num_classes_may_be_a_numpy_integer(tmp_path):
    # `labels.max() + 1` is one; it used to be refused as "not a positive integer".
    classifier = BertClassifier(tiny_encoder(), num_classes=np.int64(3))
    assert classifier.num_classes == 3 and type(classifier.num_classes) is int
    assert save_and_load(classifier, tmp_path).num_classes == 3
    for bad in (0, 2.0, True, "3"):
        with pytest.raises(ValueError, match=f"num_classes must be a positive integer, got "
                                             f"{bad!r}"):
            BertClassifier(tiny_encoder(), num_classes=bad)
