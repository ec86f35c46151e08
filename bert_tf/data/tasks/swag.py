"""SWAG-format multiple-choice data: reading the CSV and packing one sequence per choice.

The SWAG CSV header is `video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,...,
ending3,label`. As in the BERT paper, the context is `sent1` and choice i is
`sent2 + " " + ending<i>`; each choice is packed with the context as a sentence pair
`[CLS] sent1 [SEP] sent2 ending_i [SEP]`, giving `[num_choices, seq]` inputs for
`BertMultipleChoice`. The number of choices is the number of `ending<i>` columns (at least 2).
Only `sent1`, `sent2` and the endings are required; `label` (the right ending's index) only for
training and evaluation, `fold-ind` names the examples in prediction files when present.

Errors name the file, line and column (`SwagFormatError`): a missing column, a row with the
wrong number of fields, an empty context or ending, a label that is not a choice index.

Example:
    >>> examples = read_swag("swag/val.csv", require_labels=True)
    >>> examples.contexts[0], examples.choices[0][examples.labels[0]]
    >>> dataset = examples.dataset(BertPreprocessor("vocab.txt", True, seq_length=128))
"""

import csv
import dataclasses
import re

import tensorflow as tf

from bert_tf.data.tasks.chunked_packing import pack_in_chunks

CONTEXT_COLUMN, CHOICE_START_COLUMN, LABEL_COLUMN, ID_COLUMN = "sent1", "sent2", "label", "fold-ind"
_ENDING_COLUMN = re.compile(r"ending(\d+)")


class SwagFormatError(ValueError):
    """A SWAG CSV file that cannot be read as asked; the message names the file and line."""


@dataclasses.dataclass
class SwagExamples:
    """The examples of a SWAG CSV file.

    contexts: `[examples]` strings (`sent1`).
    choices: `[examples][num_choices]` strings (`sent2 + " " + ending<i>`).
    labels: `[examples]` index of the right choice, or None when the file has no labels.
    lines: `[examples]` line number of each example's row in the file.
    ids: `[examples]` the `fold-ind` column, or the line numbers as strings.
    """

    contexts: list
    choices: list
    labels: list
    lines: list
    ids: list

    def __len__(self):
        return len(self.contexts)

    @property
    def num_choices(self):
        return len(self.choices[0])

    def texts(self):
        """`((context, choices), label)` per example (label -1 without labels), unpacked:
        cheaper to shuffle than ids; `packing(preprocessor)` packs them."""
        labels = self.labels if self.labels is not None else [-1] * len(self)
        return tf.data.Dataset.from_tensor_slices(((self.contexts, self.choices), labels))

    def packing(self, preprocessor):
        """A function from a dataset of `texts()` elements to `(features, label)`, features the
        encoder's inputs `[num_choices, seq_length]` from `preprocessor` (a `BertPreprocessor`)."""
        num_choices, seq_length = self.num_choices, preprocessor.packer.seq_length

        def pack(texts, labels):
            contexts, choices = texts
            # One (context, choice) pair per sequence, the rows of an example adjacent.
            contexts = tf.broadcast_to(contexts[:, None], tf.shape(choices))
            packed = preprocessor((tf.reshape(contexts, [-1]), tf.reshape(choices, [-1])))
            return ({key: tf.reshape(value, [-1, num_choices, seq_length])
                     for key, value in packed.items()}, labels)

        return lambda texts: pack_in_chunks(texts, pack)

    def dataset(self, preprocessor):
        """`(features, label)` per example in file order: `packing(preprocessor)(texts())`."""
        return self.packing(preprocessor)(self.texts())

    def truncated_choices(self, tokenizer, seq_length):
        """How many (context, choice) pairs have more pieces than fit in `seq_length`."""
        def lengths(texts):
            return tokenizer.tokenize_to_pieces(tf.constant(texts)).row_lengths().numpy()

        flat_choices = [choice for choices in self.choices for choice in choices]
        context_lengths = lengths(self.contexts).repeat(self.num_choices)
        return int(((context_lengths + lengths(flat_choices) + 3) > seq_length).sum())


def _error(path, line, message):
    return SwagFormatError(f"{path}:{line}: {message}")


def _utf8_lines(path, binary):
    """The lines of the open binary file, decoded one by one: a byte that is not UTF-8 is
    named with its own line (decoded a block at a time, the error could only say "near" a line,
    and named the block's first: line 1 for a bad byte on line 40)."""
    for number, raw in enumerate(binary, start=1):
        try:
            yield raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise SwagFormatError(f"{path}:{number}: not UTF-8 text ({error.reason} at byte "
                                  f"{error.start} of the line)") from None


def read_swag(path, require_labels):
    """The examples of the SWAG CSV file `path` (UTF-8, with a header row). Raises
    `SwagFormatError` naming the file, line and column of the first problem."""
    with open(path, "rb") as f:
        reader = csv.reader(_utf8_lines(path, f))
        try:
            header = next(reader, None)
            if not header:
                raise SwagFormatError(f"{path}: empty file; expected a header row with "
                                      f"{CONTEXT_COLUMN}, {CHOICE_START_COLUMN}, ending0, ...")
            columns = {name: index for index, name in enumerate(header)}
            endings = sorted(int(m.group(1)) for name in header
                             if (m := _ENDING_COLUMN.fullmatch(name)))
            if endings != list(range(len(endings))) or len(endings) < 2:
                raise _error(path, 1, f"the header needs the columns ending0, ending1, ... (at "
                                      f"least 2, numbered from 0); it has {header}")
            required = [CONTEXT_COLUMN, CHOICE_START_COLUMN] + ([LABEL_COLUMN] if require_labels
                                                                else [])
            missing = [name for name in required if name not in columns]
            if missing:
                raise _error(path, 1, f"no column {', '.join(repr(m) for m in missing)} in the "
                                      f"header {header}")
            has_labels = LABEL_COLUMN in columns
            examples = SwagExamples([], [], [] if has_labels else None, [], [])
            for row in reader:
                line = reader.line_num
                if not row:
                    continue
                if len(row) != len(header):
                    raise _error(path, line, f"{len(row)} field(s), but the header has "
                                             f"{len(header)}")

                def text(name, row=row, line=line):
                    value = row[columns[name]].strip()
                    if not value:
                        raise _error(path, line, f"column {name!r} is empty")
                    return value

                start = row[columns[CHOICE_START_COLUMN]].strip()
                examples.contexts.append(text(CONTEXT_COLUMN))
                examples.choices.append([f"{start} {text(f'ending{number}')}".strip()
                                         for number in endings])
                if has_labels:
                    label = row[columns[LABEL_COLUMN]].strip()
                    if not (label.isdigit() and int(label) < len(endings)):
                        raise _error(path, line, f"column 'label' is {label!r}, not a choice "
                                                 f"index 0..{len(endings) - 1}")
                    examples.labels.append(int(label))
                examples.lines.append(line)
                examples.ids.append(row[columns[ID_COLUMN]] if ID_COLUMN in columns
                                    else str(line))
        except csv.Error as error:
            raise _error(path, reader.line_num, f"not CSV: {error}") from None
    if not examples.contexts:
        raise SwagFormatError(f"{path}: no examples after the header")
    return examples
