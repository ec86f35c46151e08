"""Reading GLUE's TSV files into examples: texts, labels and ids, column-wise.

GLUE files are tab-separated with NO quoting: a text may start with `"` or hold unbalanced
quotes (MRPC, SST-2), so lines are split on tabs and nothing else, as Google's
`run_classifier.py` does (`csv.reader(..., quotechar=None)`). Columns are found by the names in
the file's header (see `GlueTask`), so a file of the wrong task or format fails on its header.

Bad input never gives a silent wrong result:
* a missing or empty file, a header without the task's columns, a line with the wrong number
  of columns, a label outside the task's fixed list, a score that is not a finite number,
  bytes that are not UTF-8: `ValueError` (`FileNotFoundError`) naming the file, line and column;
* an example with an empty (or all-whitespace) text: skipped when `skip_empty_texts` (training
  and evaluation: it carries nothing to learn or score), and counted in `skipped` with its line,
  for the caller to report; kept (and counted in a warning) otherwise (prediction: a test file
  needs a prediction per id).

Example:
    >>> examples = read_glue_tsv("glue/MRPC/dev.tsv", glue_task("MRPC"))
    >>> len(examples), examples.texts[0][0], examples.labels[0]
    (408, "He said the foodservice pie business doesn't fit ...", 1)
"""

import codecs
import dataclasses
import itertools
import logging
import math
import os

import numpy as np

logger = logging.getLogger("bert_tf.data")

_PROGRESS_EVERY = 100_000  # lines between progress messages (MNLI and QQP have ~400k)


@dataclasses.dataclass
class GlueExamples:
    """The examples of one GLUE file, column-wise (as `tf.data.Dataset.from_tensor_slices`
    takes them).

    Attributes:
        path: the file read.
        ids: each example's id (the file's `index`/`id` column, else its line number).
        texts: one list of strings per text column (a sentence, or a pair).
        labels: int32 class ids, or float32 scores for regression; None when not read.
        lines: each example's 1-based line number in `path`.
        skipped: `(line, reason)` of every example left out.
    """

    path: str
    ids: list
    texts: tuple
    labels: np.ndarray
    lines: list
    skipped: list

    def __len__(self):
        return len(self.ids)


def _rows(path):
    """(line number, fields) of every non-blank line, split on tabs only."""
    with open(path, "rb") as f:
        for number, raw in enumerate(f, start=1):
            if number == 1 and raw.startswith(codecs.BOM_UTF8):  # MRPC's files start with one
                raw = raw[len(codecs.BOM_UTF8):]
            raw = raw.rstrip(b"\r\n")
            if not raw.strip():  # blank, or spaces only: no example
                continue
            if b"\r" in raw:
                raise ValueError(f"{path}:{number}: lines end in a lone carriage return (CR, "
                                 f"as old Mac files do); GLUE files have one example per line, "
                                 f"ending in LF or CRLF")
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                raise ValueError(f"{path}:{number}: not UTF-8 text ({error.reason} at byte "
                                 f"{error.start} of the line)") from None
            if number % _PROGRESS_EVERY == 0:
                logger.info("%s: %d lines read", path, number)
            yield number, line.split("\t")


def _column_index(header, name, path, task, header_line):
    if name not in header:
        where = f"{path}:{header_line}" if header_line else path
        raise ValueError(f"{where}: no column {name!r}, which {task.name} needs; the columns "
                         f"are {_short_list(header)}. Is this a {task.name} file in GLUE's TSV "
                         f"format?")
    return header.index(name)


def _short_list(names, most=12, width=40):
    """`names` for a one-line message: at most `most` of them, each cut to `width` characters
    (a file that is no TSV makes one "column" of a whole line)."""
    shown = [name if len(name) <= width else name[:width - 3] + "..." for name in names[:most]]
    more = f", ... ({len(names)} columns)" if len(names) > most else ""
    return "[" + ", ".join(map(repr, shown)) + more + "]"


def _label(value, task, path, number):
    if task.is_regression:
        try:
            score = float(value)
        except ValueError:
            score = math.nan
        # float() also reads "nan" and "inf": a NaN score makes the loss NaN from the first
        # step on, and the run would still end "successfully".
        if not math.isfinite(score):
            raise ValueError(f"{path}:{number}: the {task.label_column!r} column must be a "
                             f"finite number for {task.name}, got {value!r}")
        return score
    if value not in task.label_names:
        raise ValueError(f"{path}:{number}: unknown label {value!r} in column "
                         f"{task.label_column!r}; {task.name}'s labels are "
                         f"{list(task.label_names)}")
    return task.label_names.index(value)


def read_glue_tsv(path, task, labelled=True, skip_empty_texts=True):
    """Reads the examples of `task` (a `GlueTask`) from the TSV file `path`.

    Args:
        path: a GLUE file (train.tsv, dev.tsv, test.tsv...).
        task: its `GlueTask`.
        labelled: read the label column (train and dev files); test files have none.
        skip_empty_texts: leave out (and list in `skipped`) examples with an empty text.

    Returns:
        `GlueExamples`. Raises `FileNotFoundError` or `ValueError` (see the module doc).
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{task.name} data file {path} does not exist")
    rows = _rows(path)
    header_line, header = next(rows, (None, None))
    if header is None:
        raise ValueError(f"{path} is empty")
    if task.headerless_columns and task.text_columns[0] not in header:
        # CoLA's train.tsv and dev.tsv start with their first example.
        rows = itertools.chain([(header_line, header)], rows)
        header, header_line = list(task.headerless_columns), None
    text_indexes = [_column_index(header, name, path, task, header_line)
                    for name in task.text_columns]
    label_index = (_column_index(header, task.label_column, path, task, header_line)
                   if labelled else None)
    id_index = header.index(task.id_column) if task.id_column in header else None

    ids, texts, labels, lines, skipped = [], tuple([] for _ in text_indexes), [], [], []
    kept_empty = []
    for number, fields in rows:
        if len(fields) != len(header):
            raise ValueError(
                f"{path}:{number}: {len(fields)} tab-separated column(s), expected "
                f"{len(header)} {_short_list(header)}; GLUE files have one example per line "
                f"and no tabs inside texts")
        empty = [task.text_columns[i] for i, index in enumerate(text_indexes)
                 if not fields[index].strip()]
        if empty and skip_empty_texts:
            skipped.append((number, f"empty {' and '.join(map(repr, empty))}"))
            continue
        if empty:
            kept_empty.append(number)
        if labelled:
            labels.append(_label(fields[label_index], task, path, number))
        for column, index in zip(texts, text_indexes):
            column.append(fields[index])
        ids.append(fields[id_index] if id_index is not None else str(number))
        lines.append(number)
    if not ids:
        raise ValueError(f"{path} has no {task.name} examples"
                         + (f" ({len(skipped)} skipped for an empty text)" if skipped else ""))
    if skipped:
        logger.warning("%s: skipped %d example(s) with an empty text (first at line %d)", path,
                       len(skipped), skipped[0][0])
    if kept_empty:
        logger.warning("%s: %d example(s) with an empty text (first at line %d) are kept: the "
                       "model sees no text for them", path, len(kept_empty), kept_empty[0])
    label_dtype = np.float32 if task.is_regression else np.int32
    return GlueExamples(path, ids, texts, np.asarray(labels, label_dtype) if labelled else None,
                        lines, skipped)
