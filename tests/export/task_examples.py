"""The task models the export tests build, and what each one's serving_default is fed.

Example:
    >>> model = new_task_model("squad")          # a random one-layer BertSpanLabeler
    >>> signature(**{name: tf.constant(value) for name, value in FEEDS["squad"].items()})
"""

from bert_tf import BertEncoder
from bert_tf.models.bert_classifier import BertClassifier
from bert_tf.models.bert_multiple_choice import BertMultipleChoice
from bert_tf.models.bert_span_labeler import BertSpanLabeler
from bert_tf.models.bert_token_classifier import BertTokenClassifier
from tests.export.tiny_models import tiny_config

SEQ_LENGTH = 16
LABELS = ["negative", "positive", "neutral"]
# export_task_model's options per task (besides the vocabulary and SEQ_LENGTH).
EXPORT_OPTIONS = {"classifier": {"text_pairs": True, "label_names": LABELS},
                  "ner": {}, "multiple_choice": {},
                  # Windows of 16 - 3 - question tokens, 4 apart: FEEDS fit in one.
                  "squad": {"max_answer_length": 3, "max_query_length": 5, "doc_stride": 4,
                            "max_windows": 3}}
# Inputs of each task's serving_default. Nothing here is truncated at SEQ_LENGTH.
FEEDS = {
    "classifier": {"text_a": ["Hello world!", "What a good film", ""],
                   "text_b": ["unaffable", "the movies", "bad"]},
    "ner": {"text": ["Hello, unaffable world", "what?", ""]},
    "squad": {"question": ["what world?", "a film?"],
              "context": ["Hello unaffable world, the world.", "a good film! a bad movie"]},
    "multiple_choice": {"context": ["what is the film", "hello"],
                        "choices": [["good", "bad", "un"], ["world", "the world", ""]]},
}


def new_task_model(task):
    """A random task model over a one-layer tiny encoder (3 classes where there are classes)."""
    encoder = BertEncoder(tiny_config(num_hidden_layers=1))
    return {"classifier": lambda: BertClassifier(encoder, num_classes=len(LABELS)),
            "ner": lambda: BertTokenClassifier(encoder, num_classes=3),
            "squad": lambda: BertSpanLabeler(encoder),
            "multiple_choice": lambda: BertMultipleChoice(encoder)}[task]()
