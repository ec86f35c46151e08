"""TFDS's `glue/<config>` datasets read into the `GlueExamples` the TSV reader makes.

TFDS names the features `sentence`, `sentence1`/`sentence2`, `question1`/`question2`,
`question`/`sentence`, `premise`/`hypothesis`, `label` and `idx` (the example's row in GLUE's
file). Examples are returned in `idx` order, which is the file's order, so training, evaluation
and prediction see exactly what the TSV path sees (same texts, labels and order), and
predictions are keyed by `idx`.

Labels are turned into the task's class ids (`GlueTask.label_names`, Google's order), whatever
order TFDS's ClassLabel has: by name where the names are the task's (RTE, QNLI, MNLI, whose
TFDS order "entailment, neutral, contradiction" differs from Google's), and by index where
the task's labels are GLUE's digits "0", "1" (TFDS's generator turns the file's digit i into
class i: CoLA "unacceptable" = "0", MRPC "equivalent" = "1", WNLI "entailment" = "1").
The test splits carry label -1; they are read without labels.

Example:
    >>> task = glue_task_for_tfds("glue/mnli")
    >>> glue_tfds_splits(task, "eval")
    ('validation_matched', 'validation_mismatched')
    >>> examples = read_glue_tfds("glue/mnli", "validation_matched", "~/tensorflow_datasets", task)
    >>> len(examples), examples.labels[:3]
    (9815, array([2, 0, 1], dtype=int32))
"""

import logging

import numpy as np

from bert_tf.data.tasks.glue import GlueExamples
from bert_tf.data.tasks.glue_tasks import glue_task
from bert_tf.data.tfds.catalog import (TfdsInputError, class_names, columns, prepared_builder,
                                       split_label)

logger = logging.getLogger("bert_tf.data")

# TFDS's text features of each GLUE config, in the task's text-column order.
TEXT_FEATURES = {
    "cola": ("sentence",), "sst2": ("sentence",), "mrpc": ("sentence1", "sentence2"),
    "qqp": ("question1", "question2"), "stsb": ("sentence1", "sentence2"),
    "mnli": ("premise", "hypothesis"), "qnli": ("question", "sentence"),
    "rte": ("sentence1", "sentence2"), "wnli": ("sentence1", "sentence2"),
}
# The TFDS splits of each mode, when not given: MNLI has a matched and a mismatched set.
_SPLITS = {"train": ("train",), "eval": ("validation",), "predict": ("test",)}
_MNLI_SPLITS = {"train": ("train",),
                "eval": ("validation_matched", "validation_mismatched"),
                "predict": ("test_matched", "test_mismatched")}


def glue_config(tfds_name):
    """The GLUE config of `tfds_name` ("glue/sst2" -> "sst2"); raises `TfdsInputError` for a
    name that is not one of the configs in `TEXT_FEATURES`."""
    name, _, config = tfds_name.partition("/")
    if name != "glue" or config not in TEXT_FEATURES:
        raise TfdsInputError(f"--tfds_name {tfds_name!r} is not a GLUE task; use glue/<config> "
                             f"with a config of {', '.join(TEXT_FEATURES)}")
    return config


def glue_task_for_tfds(tfds_name):
    """The `GlueTask` of a TFDS GLUE name ("glue/sst2" -> SST-2, "glue/stsb" -> STS-B)."""
    return glue_task(glue_config(tfds_name))


def glue_tfds_splits(task, mode, split=None):
    """The TFDS splits `mode` ("train", "eval", "predict") reads: `split` (a comma-separated
    list), by default TFDS's `train` / `validation` / `test`; for MNLI, `validation` and `test`
    (or no split) mean its matched and mismatched splits."""
    if not split or (task.name == "MNLI" and split == _SPLITS[mode][0]):
        return (_MNLI_SPLITS if task.name == "MNLI" else _SPLITS)[mode]
    return tuple(name.strip() for name in split.split(",") if name.strip())


def tfds_class_ids(names, task, tfds_name):
    """The task's class id of each of TFDS's class `names` (an array indexed by TFDS's class
    id); raises `TfdsInputError` when they do not map (see the module doc)."""
    if sorted(names) == sorted(task.label_names):
        return np.array([task.label_names.index(name) for name in names], np.int32)
    if task.label_names == tuple(str(i) for i in range(len(names))):
        return np.arange(len(names), dtype=np.int32)
    raise TfdsInputError(f"{tfds_name}: its classes {names} do not map onto {task.name}'s "
                         f"labels {list(task.label_names)}")


def read_glue_tfds(tfds_name, split, data_dir, task, labelled=True, skip_empty_texts=True):
    """Reads the examples of `task` from split `split` of the TFDS dataset `tfds_name`, as
    `bert_tf.data.tasks.glue.read_glue_tsv` reads a file: `ids` are TFDS's `idx` (as strings),
    `lines` the `idx` numbers, `path` "glue/<config>:<split>".

    Raises `TfdsInputError` for a dataset, split or feature that is not there.
    """
    config = glue_config(tfds_name)
    builder = prepared_builder(tfds_name, data_dir)
    where = split_label(builder, split)
    features = TEXT_FEATURES[config]
    missing = [name for name in (*features, "label", "idx") if name not in builder.info.features]
    if missing:
        raise TfdsInputError(f"{where}: no feature {', '.join(missing)}; its features are "
                             f"{', '.join(builder.info.features)}")
    data = columns(builder, split, (*features, "label", "idx"))
    order = np.argsort(data["idx"], kind="stable")
    indexes = data["idx"][order].tolist()
    texts = tuple([value.decode("utf-8") for value in data[name][order]] for name in features)
    # Which text columns are empty, per example.
    empty = [[name for name, column in zip(features, texts) if not column[row].strip()]
             for row in range(len(indexes))]
    keep = [not (names and skip_empty_texts) for names in empty]
    skipped = [(index, f"empty {' and '.join(map(repr, names))}")
               for index, names, kept in zip(indexes, empty, keep) if not kept]
    if not any(keep):
        raise TfdsInputError(f"{where} has no {task.name} examples"
                             + (f" ({len(skipped)} skipped for an empty text)" if skipped else ""))
    labels = data["label"][order][keep] if labelled else None
    if labelled and task.is_regression:
        labels = labels.astype(np.float32)
    elif labelled:
        names = class_names(builder, "label")
        unlabelled = np.flatnonzero((labels < 0) | (labels >= len(names)))
        if unlabelled.size:
            first = np.asarray(indexes)[keep][unlabelled[0]]
            raise TfdsInputError(f"{where}: example idx {first} has no label "
                                 f"({labels[unlabelled[0]]}); read test splits for prediction "
                                 f"only")
        labels = tfds_class_ids(names, task, tfds_name)[labels]
    kept_empty = [index for index, names, kept in zip(indexes, empty, keep) if names and kept]
    for what, rows in (("skipped", skipped), ("kept (the model sees no text for them)",
                                              kept_empty)):
        if rows:
            logger.warning("%s: %d example(s) with an empty text %s; the first is idx %s",
                           where, len(rows), what, rows[0][0] if rows is skipped else rows[0])
    kept_indexes = [index for index, kept in zip(indexes, keep) if kept]
    return GlueExamples(where, [str(index) for index in kept_indexes],
                        tuple([text for text, kept in zip(column, keep) if kept]
                              for column in texts),
                        labels, kept_indexes, skipped)
