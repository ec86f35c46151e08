"""Pre-training text from a TFDS text dataset (`wikipedia/20230601.en`, `c4/en`, ...): each
example is one document, read in the pre-training text format.

The pre-training readers take one sentence per line and a blank line between documents
(`bert_tf.data.pretraining.corpus`). A TFDS text example is a whole document in one string
(`text`, or the feature `text_key`), so it is cut into sentences by the package's prose rule
(`bert_tf.data.pretraining.prose`: paragraphs are runs of non-blank lines, split after `.`, `!`
or `?` before an upper-case letter or a digit, except after common abbreviations and initials),
and a blank line follows each document.

The prepared split's files (TFDS shards, TFRecord) stand in for text files: both pre-training
readers take a list of files and a function that reads one file's lines, so everything
downstream is unchanged. Files are read one after the other, one example at a time (never the
whole split in memory); `create_pretraining_data` reads them in order (the output depends only
on the seed and the chunk size), and `dynamic_masking_dataset` gives each input pipeline of a
`multi_worker_mirrored` job its own files (`InputContext`) when there are at least as many
files as pipelines, and shuffles them with the seed: the stream is deterministic for a seed.

Example:
    >>> source = TfdsText("wikipedia/20230601.en", "train", "~/tensorflow_datasets")
    >>> statistics = CorpusStatistics()
    >>> for chunk in read_document_chunks(source.files, 8 << 20, statistics,
    ...                                   read_lines=source.lines):
    ...     print(len(chunk), "documents; first sentence:", chunk[0][0])
    >>> dataset = dynamic_masking_dataset(source.files, 32, 128, 20, tokenizer=tokenizer,
    ...                                   read_lines=source.line_dataset)
"""

import numpy as np
import tensorflow as tf

from bert_tf.data.pretraining.prose import paragraphs, split_sentences
from bert_tf.data.tfds.catalog import TfdsInputError, check_split, prepared_builder

DEFAULT_TEXT_KEY = "text"

# Bytes a TFRecord file holds around each record: its length (8) and two CRCs (4 each).
_TFRECORD_FRAMING = 16


def document_sentences(text):
    """The sentences of one document (a string with paragraphs on separate lines)."""
    return [sentence for paragraph in paragraphs(text.splitlines())
            for sentence in split_sentences(paragraph)]


class TfdsText:
    """The files of a prepared TFDS text split, and how to read them as pre-training lines.

    Args:
        tfds_name: the dataset, e.g. "wikipedia/20230601.en", "c4/en".
        split: a whole split ("train"); slices select examples inside files, which the
            file-by-file readers cannot do.
        data_dir: the TFDS data dir (None: TFDS's default).
        text_key: the text feature holding a document.

    Raises `TfdsInputError` for a dataset, split or text feature that is not there.
    """

    def __init__(self, tfds_name, split="train", data_dir=None, text_key=DEFAULT_TEXT_KEY):
        if "[" in split:
            raise TfdsInputError(f"--tfds_split {split!r}: pre-training reads whole splits "
                                 f"file by file, not slices")
        builder = prepared_builder(tfds_name, data_dir)
        check_split(builder, split)
        if text_key not in builder.info.features:
            raise TfdsInputError(f"TFDS dataset {builder.info.full_name} has no feature "
                                 f"{text_key!r} (--tfds_text_key); its features are "
                                 f"{', '.join(builder.info.features)}")
        feature = builder.info.features[text_key]
        # One document is one string: a label or a list of strings would fail at its first
        # example, deep in the reading.
        if getattr(feature, "tf_dtype", None) != tf.string or feature.shape != ():
            texts = [name for name, other in builder.info.features.items()
                     if getattr(other, "tf_dtype", None) == tf.string and other.shape == ()]
            raise TfdsInputError(f"TFDS dataset {builder.info.full_name}: feature {text_key!r} "
                                 f"(--tfds_text_key) is {type(feature).__name__}, not one "
                                 f"text per example; its text features are "
                                 f"{', '.join(texts) or 'none'}")
        if builder.info.file_format.value != "tfrecord":
            raise TfdsInputError(f"TFDS dataset {builder.info.full_name} is stored as "
                                 f"{builder.info.file_format.value}; pre-training reads "
                                 f"TFRecord shards")
        self.text_key = text_key
        self.features = builder.info.features
        self.files = [str(instruction.filename)
                      for instruction in builder.info.splits[split].file_instructions]
        if not self.files:
            raise TfdsInputError(f"TFDS dataset {builder.info.full_name}: split {split!r} "
                                 f"has no files")

    def lines(self, path, statistics):
        """Yields `(line, size)` like `corpus.utf8_lines`: each document's sentences, then a
        blank line, with their UTF-8 sizes. Counts into `statistics` the file, the lines and
        the records' bytes with their framing, so that a file read counts its size (what
        progress is a share of); a document that is not UTF-8 is skipped and counted in
        `invalid_utf8_lines`."""
        statistics.files += 1
        for record in tf.data.TFRecordDataset(path).as_numpy_iterator():
            statistics.bytes += len(record) + _TFRECORD_FRAMING
            text = self.features.deserialize_example_np(record)[self.text_key]
            try:
                sentences = document_sentences(text.decode("utf-8"))
            except UnicodeDecodeError:
                statistics.invalid_utf8_lines[path] += 1
                continue
            statistics.lines += len(sentences) + 1
            for sentence in sentences:
                yield sentence + "\n", len(sentence.encode("utf-8")) + 1
            yield "\n", 1

    def line_dataset(self, path):
        """A `tf.data.Dataset` of the lines of the file `path` (a string tensor): each
        document's sentences, then an empty line."""
        def sentences(text):
            return np.array([*document_sentences(text.decode("utf-8", "replace")), ""],
                            dtype=object)

        def document(record):
            text = self.features.deserialize_example(record)[self.text_key]
            lines = tf.numpy_function(sentences, [text], tf.string, stateful=False)
            return tf.data.Dataset.from_tensor_slices(tf.ensure_shape(lines, [None]))

        return tf.data.TFRecordDataset(path).flat_map(document)
