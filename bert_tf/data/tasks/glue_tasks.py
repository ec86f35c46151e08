"""The GLUE tasks' file formats: which TSV files, which columns, which labels.

The column choices are those of Google's `run_classifier.py` processors (and of the GLUE
data's own headers, which name the columns): e.g. MRPC reads `#1 String`, `#2 String` and the
label `Quality`; MNLI reads `sentence1`, `sentence2` and `gold_label`. Label lists are fixed per
task and in Google's order, so that class ids, checkpoints and exported label names agree
whatever labels a file happens to contain.

Example:
    >>> task = glue_task("mrpc")
    >>> task.text_columns, task.label_column, task.label_names
    (('#1 String', '#2 String'), 'Quality', ('0', '1'))
    >>> task.files["eval"]
    ('dev.tsv',)
"""

import dataclasses

from bert_tf.metrics.glue import glue_task_key


@dataclasses.dataclass(frozen=True)
class GlueTask:
    """One GLUE task's data format.

    Attributes:
        name: the GLUE name ("SST-2", "MNLI"...), also the `bert_tf.metrics.glue` task name.
        text_columns: header names of the one or two text columns (a sentence, or a pair).
        label_column: header name of the label column (absent from test files).
        label_names: the classes in class-id order; None for regression (STS-B).
        id_column: header name of the example id in the files that have one ("index", "id");
            other files use the line number.
        headerless_columns: the column names of files that come without a header (CoLA's
            train.tsv and dev.tsv); such a file is recognised by a first line that does not
            name the text column.
        files: the file names in `--data_dir` for "train", "eval" and "predict" (MNLI: matched,
            then mismatched).
    """

    name: str
    text_columns: tuple
    label_column: str
    label_names: tuple = None
    id_column: str = "index"
    headerless_columns: tuple = None
    files: dict = dataclasses.field(default_factory=lambda: {
        "train": ("train.tsv",), "eval": ("dev.tsv",), "predict": ("test.tsv",)})

    @property
    def is_regression(self):
        return self.label_names is None

    @property
    def num_outputs(self):
        """Classes, or 1 for a regression score."""
        return 1 if self.is_regression else len(self.label_names)

    @property
    def is_pair_task(self):
        return len(self.text_columns) == 2


_BINARY = ("0", "1")
_ENTAILMENT = ("entailment", "not_entailment")

GLUE_TASKS = {task.name: task for task in (
    GlueTask("CoLA", ("sentence",), "label", _BINARY,
             headerless_columns=("source", "label", "original_label", "sentence")),
    GlueTask("SST-2", ("sentence",), "label", _BINARY),
    GlueTask("MRPC", ("#1 String", "#2 String"), "Quality", _BINARY),
    GlueTask("QQP", ("question1", "question2"), "is_duplicate", _BINARY, id_column="id"),
    GlueTask("STS-B", ("sentence1", "sentence2"), "score"),
    GlueTask("MNLI", ("sentence1", "sentence2"), "gold_label",
             ("contradiction", "entailment", "neutral"),
             files={"train": ("train.tsv",), "eval": ("dev_matched.tsv", "dev_mismatched.tsv"),
                    "predict": ("test_matched.tsv", "test_mismatched.tsv")}),
    GlueTask("QNLI", ("question", "sentence"), "label", _ENTAILMENT),
    GlueTask("RTE", ("sentence1", "sentence2"), "label", _ENTAILMENT),
    GlueTask("WNLI", ("sentence1", "sentence2"), "label", _BINARY),
)}


def glue_task(name):
    """The `GlueTask` called `name` ("sst-2", "SST2", "sts_b"...: case, "-" and "_" ignored)."""
    tasks = {glue_task_key(task_name): task for task_name, task in GLUE_TASKS.items()}
    if glue_task_key(name) not in tasks:
        raise ValueError(f"Unknown GLUE task {name!r}; known: {', '.join(GLUE_TASKS)}")
    return tasks[glue_task_key(name)]
