"""TFDS's `hellaswag` (and multiple-choice datasets with `context`, `endings` and `label`) read
into the `bert_tf.data.tasks.swag.SwagExamples` the SWAG CSV reader makes.

Each TFDS example is one question: a `context` string, its `endings` (the same number in every
example) and the index of the right one, `label` (-1 where the split has no labels: HellaSwag's
`test`). Choice i is packed as the pair `[CLS] context [SEP] ending_i [SEP]`, as the CSV path
packs SWAG's `sent1` and `sent2 + ending_i`. TFDS stores the examples shuffled and keeps no
line of the source file: examples come in stored order, and an example's `id` and `line` in
the tool's prediction file are its position in the split.

Example:
    >>> examples, where = read_multiple_choice_tfds("hellaswag", "validation", None,
    ...                                             require_labels=True)
    >>> len(examples), examples.num_choices, where
    (10042, 4, 'hellaswag:validation')
"""

from bert_tf.data.tasks.swag import SwagExamples
from bert_tf.data.tfds.catalog import TfdsInputError, examples, prepared_builder, split_label

_FEATURES = ("context", "endings", "label")


def read_multiple_choice_tfds(tfds_name, split, data_dir, require_labels):
    """`(SwagExamples, "name:split")` of split `split` of `tfds_name`. The examples have labels
    when every example of the split has one; `require_labels` makes a missing label (-1) an
    error. Raises `TfdsInputError` for a dataset without `context`, `endings` and `label`, an
    example whose number of endings differs from the first's, or an empty context or ending."""
    builder = prepared_builder(tfds_name, data_dir)
    where = split_label(builder, split)
    missing = [name for name in _FEATURES if name not in builder.info.features]
    if missing:
        raise TfdsInputError(f"{where}: no feature {', '.join(missing)} (a multiple-choice "
                             f"dataset has {', '.join(_FEATURES)}); its features are "
                             f"{', '.join(builder.info.features)}")
    read = SwagExamples([], [], [], [], [])
    for index, example in enumerate(examples(builder, split)):
        context = example["context"].decode("utf-8").strip()
        endings = [ending.decode("utf-8").strip() for ending in example["endings"]]
        label = int(example["label"])
        if read.choices and len(endings) != read.num_choices:
            raise TfdsInputError(f"{where}: example {index} has {len(endings)} endings, the "
                                 f"examples before it {read.num_choices}")
        if len(endings) < 2:
            raise TfdsInputError(f"{where}: example {index} has {len(endings)} ending(s); a "
                                 f"choice needs at least 2")
        if not context or not all(endings):
            empty = "its context" if not context else f"ending {endings.index('')}"
            raise TfdsInputError(f"{where}: example {index}: {empty} is empty")
        if not -1 <= label < len(endings) or (label == -1 and require_labels):
            raise TfdsInputError(
                f"{where}: example {index} has label {label}, not a choice index 0.."
                f"{len(endings) - 1}" + (" (-1: the split has no labels; it can only be "
                                         "predicted)" if label == -1 else ""))
        read.contexts.append(context)
        read.choices.append(endings)
        read.labels.append(label)
        read.lines.append(index)
        read.ids.append(str(index))
    if not read.contexts:
        raise TfdsInputError(f"{where} has no examples")
    if -1 in read.labels:
        read.labels = None
    return read, where
