"""TFDS's `conll2003` (and CoNLL-like datasets with `tokens` and `ner`) read into the
`bert_tf.data.tasks.conll.Sentence`s the file reader makes.

Each TFDS example is one sentence: `tokens`, and the ClassLabel sequences `ner` (and, in
conll2003, `pos` and `chunks`). A sentence's rows are `word POS chunk tag` as in the file (the
class names of each column), so predictions are written in the file's format, and the model's
label list is the `ner` ClassLabel's names (conll2003: O, B-PER, I-PER, B-ORG, ... in TFDS's
order) rather than the tags the training data happens to use. TFDS stores the sentences
shuffled and drops the `-DOCSTART-` lines: sentences come in stored order, none starts a
document, and `first_line` is the sentence's position in the split.

Example:
    >>> sentences, labels, where = read_conll_tfds("conll2003", "validation", data_dir=None)
    >>> len(sentences), labels[:3], where, sentences[0].rows[0]
    (3250, ['O', 'B-PER', 'I-PER'], 'conll2003/conll2003:dev', ['word', 'POS', 'chunk', 'tag'])
"""

from bert_tf.data.tasks.conll import Sentence
from bert_tf.data.tfds.catalog import (TfdsInputError, class_names, examples, prepared_builder,
                                       resolve_split, split_label)

# The columns of a row, after the word: ClassLabel sequences, in CoNLL-2003's column order.
_TAG_COLUMNS = ("pos", "chunks", "ner")


def read_conll_tfds(tfds_name, split, data_dir):
    """`(sentences, label list, label)` of split `split` of `tfds_name`: the sentences in stored
    order, the `ner` class names, and "name:split" for messages. Raises `TfdsInputError` for a
    dataset without `tokens` and `ner`."""
    builder = prepared_builder(tfds_name, data_dir)
    split = resolve_split(builder, split)
    where = split_label(builder, split)
    missing = [name for name in ("tokens", "ner") if name not in builder.info.features]
    if missing:
        raise TfdsInputError(f"{where}: no feature {', '.join(missing)} (a CoNLL-like dataset "
                             f"has tokens and ner); its features are "
                             f"{', '.join(builder.info.features)}")
    columns = [name for name in _TAG_COLUMNS if name in builder.info.features]
    names = {name: class_names(builder, name) for name in columns}
    sentences = []
    for index, example in enumerate(examples(builder, split)):
        if not len(example["tokens"]):
            continue  # not a sentence (an empty example some preparations end a file with)
        tags = [[names[name][i] for i in example[name]] for name in columns]
        rows = [[word.decode("utf-8"), *row_tags]
                for word, *row_tags in zip(example["tokens"], *tags)]
        sentences.append(Sentence(rows, index, False))
    if not sentences:
        raise TfdsInputError(f"{where} has no sentences")
    return sentences, names["ner"], where
