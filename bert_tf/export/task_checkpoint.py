"""Loading a fine-tuned task model from this package's checkpoint, for export.

Fine-tuning tools save `tf.train.Checkpoint(encoder=model.encoder, model=model, ...)`: the
encoder under `encoder` (so every `--init_checkpoint` reader finds it) and the whole task model,
head included, under `model` (`TASK_MODEL_KEY`). The head's size (number of classes) is read
from the checkpoint, so nothing but the task has to be told.

Example:
    >>> classifier = load_task_model("classifier", "/tmp/sst2_finetuned")
    >>> classifier.num_classes
    2
"""

import tensorflow as tf

from bert_tf.checkpoints import TASK_MODEL_KEY, read_config, resolve_prefix
from bert_tf.export.task_export import TASK_MODEL_CLASSES
from bert_tf.models.bert_encoder import BertEncoder

# Checkpoint key of the bias of the classification layer (`classifier`) of BertClassifier and
# BertTokenClassifier: its length is the number of classes.
_CLASSIFIER_BIAS_KEY = f"{TASK_MODEL_KEY}/classifier/bias/.ATTRIBUTES/VARIABLE_VALUE"


def load_task_model(task, init_checkpoint, bert_config_file=None, num_classes=None):
    """The `task` model ("classifier", "ner", "squad", "multiple_choice") restored from
    `init_checkpoint` (a directory or prefix). The encoder's config is `bert_config_file` or the
    `bert_config.json` beside the checkpoint; `num_classes`, when given, must match the
    checkpoint's. Raises ValueError naming what the checkpoint lacks."""
    if task not in TASK_MODEL_CLASSES:
        raise ValueError(f"Unknown task {task!r}; expected one of {sorted(TASK_MODEL_CLASSES)}.")
    prefix = resolve_prefix(init_checkpoint)
    config = read_config(init_checkpoint, bert_config_file)
    shapes = dict(tf.train.list_variables(prefix))
    if not any(key.startswith(TASK_MODEL_KEY + "/") for key in shapes):
        raise ValueError(
            f"{prefix} holds no fine-tuned task model (no `{TASK_MODEL_KEY}` object; a pre-trained "
            f"or converted checkpoint has only the encoder). Export a checkpoint written by "
            f"fine-tuning, i.e. tf.train.Checkpoint(encoder=..., {TASK_MODEL_KEY}=<{task} model>).")
    head_arguments = {}
    if task in ("classifier", "ner"):
        if _CLASSIFIER_BIAS_KEY not in shapes:
            raise ValueError(f"{prefix}: its `{TASK_MODEL_KEY}` has no classification layer "
                             f"(`classifier`): it is not a {task} model.")
        found = shapes[_CLASSIFIER_BIAS_KEY][0]
        if num_classes is not None and num_classes != found:
            raise ValueError(f"{prefix} has a {task} head with {found} classes, but "
                             f"{num_classes} were asked for.")
        head_arguments["num_classes"] = found
    model = TASK_MODEL_CLASSES[task](BertEncoder(config), **head_arguments)
    # The optimizer's slots and counters, if saved, are not needed to serve: only the model's
    # own variables must all be found.
    status = tf.train.Checkpoint(**{TASK_MODEL_KEY: model}).read(prefix).expect_partial()
    try:
        status.assert_existing_objects_matched()
    except AssertionError as error:
        raise ValueError(f"{prefix}: its `{TASK_MODEL_KEY}` does not match a {task} model with "
                         f"this config: {error}") from None
    return model
