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
