"""Loading a fine-tuned task model for export, by the task's name (`--export_type`).

Fine-tuning saves the whole task model, head included (see `bert_tf.checkpoints.layout`); the
head's size (number of classes) is read from the checkpoint, so nothing but the task has to be
told; the checkpoint also records its model's class, so another task's model is refused (a
sentence classifier's head would fit a token classifier). The loading itself is
`bert_tf.checkpoints.load_model`.

Example:
    >>> classifier = load_task_model("classifier", "/tmp/sst2_finetuned")
    >>> classifier.num_classes
    2
"""

from bert_tf.checkpoints import load_model
from bert_tf.export.task_export import TASK_MODEL_CLASSES


def load_task_model(task, init_checkpoint, bert_config_file=None, num_classes=None):
    """The `task` model ("classifier", "ner", "squad", "multiple_choice") restored from
    `init_checkpoint` (a directory or prefix). The encoder's config is `bert_config_file` or the
    `bert_config.json` beside the checkpoint; `num_classes`, when given, must match the
    checkpoint's. Raises ValueError naming what the checkpoint lacks, or the task model it
    holds instead."""
    if task not in TASK_MODEL_CLASSES:
        raise ValueError(f"Unknown task {task!r}; expected one of {sorted(TASK_MODEL_CLASSES)}.")
    head_arguments = {} if num_classes is None else {"num_classes": num_classes}
    return load_model(init_checkpoint, TASK_MODEL_CLASSES[task], bert_config_file=bert_config_file,
                      model_name=f"{task} model", **head_arguments)
